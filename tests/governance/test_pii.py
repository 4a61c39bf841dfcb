"""PII and secrets: synthetic canaries in real experiences must be gone after scrubbing; lle's own ids,
hashes and ordinary code, SQL and game text must come through unchanged."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import time
from collections import Counter
from dataclasses import dataclass, field

from lle.core import (
    ActionRequest,
    Effect,
    Evidence,
    ExecutedAction,
    Experience,
    Feedback,
    Outcome,
    PolicyInfo,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    Step,
    Strength,
    new_id,
)
from lle.governance.hygiene import scrub_experience
from lle.governance.pii import card_ok, find_instructions, iban_ok, looks_random, luhn_ok, redact
from lle.worlds.toy.layout import make_layout

FIRST = ["Ada", "Grace", "Alan", "Maria", "Chen", "Fatima", "Olu", "Ingrid", "Raj", "Sofia", "Kenji", "Amara"]
LAST = ["Lovelace", "Hopper", "Turing", "Garcia", "Wei", "Khan", "Adeyemi", "Berg", "Patel", "Rossi", "Sato"]
DOMAINS = ["example.com", "mail.example.org", "corp.example.co.uk", "uni-example.edu", "example.io"]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + _digits(rng, length - len(prefix) - 1)
    for check in string.digits:
        if luhn_ok(body + check):
            return body + check
    raise AssertionError("unreachable: one check digit always fits")


def make_card(rng: random.Random) -> str:
    brand = rng.choice(["visa", "mc", "amex", "discover"])
    prefix, length = {"visa": ("4", 16), "mc": (str(rng.randint(51, 55)), 16), "amex": (rng.choice(["34", "37"]), 15),
                      "discover": ("6011", 16)}[brand]
    number = _luhn_complete(prefix, length, rng)
    style = rng.choice(["plain", "space", "dash"])
    if style == "plain":
        return number
    groups = [number[:4], number[4:10], number[10:]] if length == 15 else [number[i:i + 4] for i in range(0, 16, 4)]
    return (" " if style == "space" else "-").join(groups)


def make_iban(rng: random.Random) -> str:
    # Country, bank-code letters, digits after them (the national BBAN layouts of these countries).
    country, letters, digits = rng.choice([("DE", 0, 18), ("GB", 4, 14), ("FR", 0, 23), ("NL", 4, 10), ("ES", 0, 20),
                                           ("CH", 0, 17), ("BE", 0, 12)])
    body = "".join(rng.choice(string.ascii_uppercase) for _ in range(letters)) + _digits(rng, digits)
    numeric = "".join(str(int(ch, 36)) for ch in body + country + "00")
    iban = f"{country}{98 - int(numeric) % 97:02d}{body}"
    assert iban_ok(iban)
    return " ".join(iban[i:i + 4] for i in range(0, len(iban), 4)) if rng.random() < 0.5 else iban


def make_phone(rng: random.Random) -> str:
    a, b, c = rng.randint(201, 989), _digits(rng, 3), _digits(rng, 4)
    return rng.choice([
        f"+1 {a} {b} {c}", f"+1-{a}-{b}-{c}", f"({a}) {b}-{c}", f"{a}-{b}-{c}", f"{a}.{b}.{c}",
        f"+44 20 {_digits(rng, 4)} {_digits(rng, 4)}", f"+44 (0)20 {_digits(rng, 4)} {_digits(rng, 4)}",
        f"020 {_digits(rng, 4)} {_digits(rng, 4)}", f"07{_digits(rng, 3)} {_digits(rng, 6)}",
        f"+49 30 {_digits(rng, 8)}", f"030 {_digits(rng, 8)}", f"+33 1 {' '.join(_digits(rng, 2) for _ in range(4))}",
        f"01 {' '.join(_digits(rng, 2) for _ in range(4))}", f"+91 98{_digits(rng, 3)} {_digits(rng, 5)}",
        f"+81 3-{_digits(rng, 4)}-{_digits(rng, 4)}",
    ])


def make_ip(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return ".".join(str(x) for x in [rng.choice([10, 23, 81, 151, 172, 192, 203]), *rng.sample(range(1, 255), 3)])
    groups = [f"{rng.randrange(1, 0xFFFF):x}" for _ in range(8)]
    return ":".join(groups) if rng.random() < 0.5 else "2001:db8:" + ":".join(groups[:2]) + "::" + groups[7]


def _alnum(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_secret(rng: random.Random, kind: str) -> str:
    upper = string.ascii_uppercase + string.digits
    if kind == "aws":
        return "AKIA" + _alnum(rng, 16, upper)
    if kind == "github":
        return rng.choice(["ghp_" + _alnum(rng, 36), "github_pat_" + _alnum(rng, 22) + "_" + _alnum(rng, 59)])
    if kind == "slack":
        return f"xoxb-{_digits(rng, 12)}-{_digits(rng, 13)}-{_alnum(rng, 24)}"
    if kind == "openai":
        return rng.choice(["sk-", "sk-proj-"]) + _alnum(rng, 48, string.ascii_letters + string.digits + "_-")
    if kind == "google":
        return "AIza" + _alnum(rng, 35, string.ascii_letters + string.digits + "_-")
    if kind == "jwt":
        header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64url(json.dumps({"sub": _digits(rng, 8), "name": rng.choice(FIRST), "iat": 1700000000}).encode())
        return f"{header}.{payload}.{_b64url(rng.randbytes(32))}"
    if kind == "pem":
        body = base64.b64encode(rng.randbytes(rng.randint(120, 300))).decode()
        lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
        label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
        return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----"
    if kind == "entropy":
        n = rng.randint(24, 40)
        hex_len = rng.choice([16, 18, 24, 30])  # 20 and 32 bytes would be sha1/sha256-sized: see pii's docstring
        return rng.choice([_b64url(rng.randbytes(n)), rng.randbytes(hex_len).hex(),
                           base64.b64encode(rng.randbytes(n)).decode()])
    if kind == "password":
        return _alnum(rng, rng.randint(10, 18), string.ascii_letters + string.digits + "!#%^*-_")
    raise AssertionError(kind)


SECRET_KINDS = ["aws", "github", "slack", "openai", "google", "jwt", "pem", "entropy", "password"]


@dataclass
class Canaries:
    pii: list[tuple[str, str]] = field(default_factory=list)
    secrets: list[tuple[str, str]] = field(default_factory=list)


def record_output(rng: random.Random, canaries: Canaries) -> str:
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    email = f"{name.split()[0].lower()}.{name.split()[1].lower()}{rng.randint(1, 99)}@{rng.choice(DOMAINS)}"
    if rng.random() < 0.2:
        email = email.replace("@", "+billing@")
    values = {"EMAIL": email, "PHONE": make_phone(rng), "CARD": make_card(rng), "IBAN": make_iban(rng),
              "IP": make_ip(rng)}
    canaries.pii += [(k, v) for k, v in values.items()]
    style = rng.choice(["kv", "json", "sql", "log"])
    if style == "json":
        return json.dumps({"id": rng.randint(1, 9999), "name": name, **{k.lower(): v for k, v in values.items()}})
    if style == "sql":
        return f"| {rng.randint(1, 999)} | {name} | {values['EMAIL']} | {values['PHONE']} | {values['CARD']} | " \
               f"{values['IBAN']} | {values['IP']} |"
    if style == "log":
        return (f"2024-05-0{rng.randint(1, 9)} 10:1{rng.randint(0, 9)}:07 INFO login ok user={values['EMAIL']} "
                f"from {values['IP']}; callback {values['PHONE']}; paid with card {values['CARD']} "
                f"(iban {values['IBAN']})")
    return "\n".join([f"Customer: {name}", *(f"{k.title()}: {v}" for k, v in values.items())])


def secret_output(rng: random.Random, canaries: Canaries) -> str:
    kind = rng.choice(SECRET_KINDS)
    secret = make_secret(rng, kind)
    canaries.secrets.append((kind, secret))
    if kind == "password":
        return rng.choice([f"DB_PASSWORD={secret}", f'{{"password": "{secret}"}}', f"password: '{secret}'",
                           f"mysql -u root --password={secret} shop"])
    if kind == "pem":
        return f"$ cat ~/.ssh/id_rsa\n{secret}\n$"
    return rng.choice([f"export TOKEN_VALUE={secret}", f"config = {{'key': '{secret}'}}", f"found {secret} in .env",
                       f"Authorization header was {secret}", f"{secret}"])


def _sw() -> SmallWorld:
    return SmallWorld(id="sql/crm-v1:crm:train:3", world="sql/crm-v1", family="sql", project="crm",
                      split=Split.train, seed=3, goal="List the customers who paid by card last week.")


def _experience(outputs: list[str], rng: random.Random) -> Experience:
    steps = []
    for i, out in enumerate(outputs):
        where = rng.choice(["observation", "observation", "observation", "error", "feedback", "args"])
        effect = Effect(observation=out if where == "observation" else "ok", error=out if where == "error" else None)
        args = {"sql": "SELECT * FROM customers", "note": out if where == "args" else ""}
        steps.append(Step(
            index=i, request=ActionRequest(tool="run_query", args=args, thought=f"look at row {i}", expect="rows"),
            executed=ExecutedAction(tool="run_query", args=args, allowed=True),
            effect=effect,
            feedback=[Feedback(source="tool", kind="stdout", content=out)] if where == "feedback" else []))
    exp = Experience(small_world=_sw(), policy=PolicyInfo(model="scripted"), steps=steps, outcome=Outcome.passed)
    ev = Evidence(experience_id=exp.id, anchor="state", outcome=Outcome.passed, strength=Strength.hard,
                  scope=Scope(level=ScopeLevel.task, family="sql", project="crm", task_id=_sw().id),
                  detail={"rows": outputs[:1]})
    return exp.model_copy(update={"evidence": [ev]}).sealed()


def test_canaries_are_gone_after_scrubbing() -> None:
    rng = random.Random(7)
    canaries = Canaries()
    experiences = []
    while len(canaries.pii) < 2500 or len(canaries.secrets) < 500:
        outputs = [record_output(rng, canaries) if rng.random() < 0.5 else secret_output(rng, canaries)
                   for _ in range(8)]
        experiences.append(_experience(outputs, rng))
    dumped = []
    for exp in experiences:
        clean = scrub_experience(exp)
        assert clean.content_hash == clean.compute_hash() and clean.id == exp.id
        redactions = clean.hygiene["redactions"]
        assert isinstance(redactions, dict) and sum(int(str(v)) for v in redactions.values()) > 0
        dumped.append(clean.model_dump_json())
    text = "\n".join(dumped)

    def gone(value: str) -> bool:
        # A PEM block is multi-line (escaped in JSON): every body line must be gone.
        parts = [ln for ln in value.splitlines() if ln and not ln.startswith("-----")] or [value]
        return not any(part in text for part in parts)

    pii_left = [(k, v) for k, v in canaries.pii if not gone(v)]
    secrets_left = [(k, v) for k, v in canaries.secrets if not gone(v)]
    pii_recall = 1 - len(pii_left) / len(canaries.pii)
    secret_recall = 1 - len(secrets_left) / len(canaries.secrets)
    by_kind = Counter(k for k, _ in canaries.pii)
    missed = Counter(k for k, _ in pii_left)
    print(f"\nPII recall {pii_recall:.4f} over {len(canaries.pii)} values "
          f"({', '.join(f'{k} {1 - missed[k] / n:.3f}' for k, n in sorted(by_kind.items()))}); "
          f"secrets recall {secret_recall:.4f} over {len(canaries.secrets)} secrets in {len(experiences)} experiences")
    assert pii_recall >= 0.99, pii_left[:10]
    assert secret_recall == 1.0, secrets_left[:10]


def test_scrub_is_idempotent_and_keeps_identity() -> None:
    rng = random.Random(3)
    exp = _experience([record_output(rng, Canaries()), secret_output(rng, Canaries()), "plain output"], rng)
    once = scrub_experience(exp)
    twice = scrub_experience(once)
    assert once.content_hash == twice.content_hash
    assert once.hygiene == twice.hygiene
    assert [e.id for e in once.evidence] == [e.id for e in exp.evidence]
    assert once.steps[2].effect.observation == "plain output"


ORDINARY = [
    # lle's own ids and digests
    " ".join(new_id(p) for p in ("exp", "evd", "upd", "rev", "itm", "stp", "run")),
    "content_hash sha256:" + hashlib.sha256(b"x").hexdigest() + " model_sha256 " + hashlib.sha256(b"y").hexdigest(),
    "commit " + hashlib.sha1(b"z").hexdigest() + " (HEAD -> main) uuid 550e8400-e29b-41d4-a716-446655440000",
    # code
    "def test_any_and_all_object_dtype(self) -> None:\n    result = np.asarray(values, dtype=object)\n"
    "    assert getElementsByClassName('row')[0].textContent == 'total'\n    # TODO: add more cases\n",
    "class HTTPPasswordMgrWithDefaultRealm(HTTPPasswordMgr):\n    def find_user_password(self, realm, authuri):\n"
    "        user, password = HTTPPasswordMgr.find_user_password(self, realm, authuri)\n"
    "        return user, password\n",
    "api_key = os.environ['OPENAI_API_KEY']\npassword: str = Field(min_length=8)\ntoken = get_token()\n"
    "secret_key: Optional[str] = None\nself.password = password\n",
    "for (let i = 0; i < 1024; i++) { buffer[i] = 0x7f; }  // 1.5x faster than memset on v18.12.1",
    "import torch\nmodel = AutoModelForCausalLM.from_pretrained('HuggingFaceTB/SmolLM2-135M-Instruct')\n"
    "print(model.config.max_position_embeddings, 8192, 3.14159, 2.718e-10)",
    "File \"/usr/lib/python3.11/site-packages/numpy/core/_methods.py\", line 118, in _mean\n"
    "    ret = umr_sum(arr, axis, dtype, out, keepdims, where=where)\nValueError: operands could not be broadcast",
    "====== 42 passed, 3 skipped, 1 xfailed in 12.31s ======\ntests/router/test_hygiene.py::test_dedupe PASSED [ 97%]",
    "color: #1f77b4; margin: 0 auto; font: 12px/1.5 'Helvetica Neue'; z-index: 2147483647;",
    # SQL
    "SELECT o.id, c.name, SUM(oi.quantity * oi.unit_price) AS total FROM orders o JOIN customers c ON c.id = "
    "o.customer_id WHERE o.created_at >= '2024-05-01' GROUP BY o.id HAVING total > 100.50 ORDER BY total DESC;",
    "id | customer_id | total   | created_at\n---+-------------+---------+---------------------\n"
    " 1 |          17 |  129.99 | 2024-05-01 10:30:00\n 2 |        1042 | 1024.00 | 2024-05-02 23:59:59\n"
    " 3 |      100234 |    0.50 | 2024-05-03 00:00:01\n(3 rows)",
    "[(1, 'Widget', 4.99, 120), (2, 'Gadget', 12.5, 7), (3, 'Doohickey', 0.25, 100000), (4, 'Sprocket', 3.0, 42)]",
    "EXPLAIN QUERY PLAN: SCAN orders USING INDEX idx_orders_created_at (created_at>?) rows=1250 cost=35.2",
    # numbers, times, versions, paths
    "epoch 1700000000000 took 0:01:23.456 at 2024-05-01T10:30:00Z; version 2.4.6; port 8080; pid 31337",
    "/srv/app/.venv/lib/python3.11/site-packages/pydantic/main.py:1234 x86_64-linux-gnu 127.0.0.1:8000",
    "weights: [0.125, -3.75, 1e-06, 42, 1024, 65536, 4294967296, 18446744073709551615]",
]


def test_ordinary_code_sql_and_ids_stay_unchanged() -> None:
    for text in ORDINARY:
        assert redact(text) == (text, Counter()), text


def test_game_text_stays_unchanged() -> None:
    for seed in range(50):
        layout = make_layout("manor" if seed % 2 else "cellar", seed)
        exits = ", ".join(f"{d} to the {r}" for d, r in sorted(layout.exits[layout.start].items()))
        text = f"You are in the {layout.start}. Exits: {exits}. The door is {layout.door_color}."
        assert redact(text) == (text, Counter())


def test_validators() -> None:
    assert card_ok("4111 1111 1111 1111") and not card_ok("4111 1111 1111 1112")
    assert not card_ok("1234567812345670")  # Luhn-valid but no issuer starts with 1
    assert iban_ok("GB82 WEST 1234 5698 7654 32") and not iban_ok("GB82 WEST 1234 5698 7654 33")
    assert looks_random("Zk3QwP9xLm2VbT7yRc4NsH8dJf6Ga1Ue") and not looks_random("test_any_and_all_object_dtype")
    assert not looks_random(hashlib.sha256(b"").hexdigest())


def test_redaction_counts_and_placeholders() -> None:
    text, counts = redact("mail ada@example.com, ring +44 20 7946 0958, key AKIAIOSFODNN7EXAMPLE, ip 8.8.8.8")
    assert text == "mail <EMAIL>, ring <PHONE>, key <SECRET>, ip <IP>"
    assert counts == Counter({"EMAIL": 1, "PHONE": 1, "SECRET": 1, "IP": 1})
    assert redact(text) == (text, Counter())
    random_digits = random.Random(1)
    runs = [_digits(random_digits, 16) for _ in range(200)]
    kept = sum(redact(f"id {r}")[0] == f"id {r}" for r in runs)
    assert kept >= 190  # only Luhn-valid runs with an issuer prefix look like cards


def test_pathological_inputs_stay_linear() -> None:
    # Each of these once took minutes (nested or unbounded quantifiers); 50 KB now takes well under a second.
    cases = ["." * 50_000, "#" * 50_000, "\n" * 50_000, " " * 50_000 + "x", "1." * 25_000,
             "a." * 25_000 + "@b.com", "password=" * 5_000, "a:" * 25_000]
    for text in cases:
        started = time.perf_counter()
        redact(text)
        find_instructions(text)
        assert time.perf_counter() - started < 5.0, text[:20]
