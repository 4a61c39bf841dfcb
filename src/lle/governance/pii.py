"""Text detectors for hygiene: PII and secrets (redacted), and instructions injected into tool output.

`redact(text)` replaces what it finds with `<EMAIL>`, `<PHONE>`, `<CARD>`, `<IBAN>`, `<IP>` or
`<SECRET>` and counts each kind. Structured PII is validated where a checksum exists (Luhn for
cards, mod-97 for IBANs, `ipaddress` for IPs), so random digit runs stay. Secrets are found by
their published formats (AWS, GitHub, Slack, OpenAI-style, Google, Stripe, JWT, PEM private keys),
by labelled assignments (`password=…`, `"api_key": "…"`, `Authorization: Bearer …`, URL
credentials) and, last, by randomness: a ≥20-character token is a secret when its entropy is high
and it does not read like an identifier. What lle writes itself (prefixed ULIDs, `sha256:` digests,
bare digests of 40/64/128 hex digits, UUIDs) is never a secret: a bare 40- or 64-hex secret is
therefore only caught when labelled. Names are not detected (that needs NER); redact free text
with that in mind.

`find_instructions` flags prompt-injection text (AgentDojo/InjecAgent-style templates, role
spoofing, tool-call lookalikes, memory poisoning) by strong patterns and by weak signals that add up
within two sentences; `quote_untrusted` stores world output as delimited data with its source.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable

PLACEHOLDERS = ("EMAIL", "PHONE", "CARD", "IBAN", "IP", "SECRET")
"""Kinds `redact` counts; each is written back as `<KIND>`."""

# --- secrets by format --------------------------------------------------------------------------

_KEY_FORMATS = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r"|(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}(?![A-Z0-9])"
    r"|\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{22,255}\b"
    r"|\bglpat-[A-Za-z0-9_-]{20,}|\bxox[abposre]-[A-Za-z0-9-]{10,}"
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+"
    r"|\bsk-[A-Za-z0-9_-]{20,}|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|\bAIza[0-9A-Za-z_-]{35}|\bhf_[A-Za-z0-9]{30,}|\bnpm_[A-Za-z0-9]{36}\b",
    re.DOTALL,
)
_BEARER = re.compile(r"(?i)(\bauthorization\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)([A-Za-z0-9._~+/=-]{8,})")
_URL_CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]{0,30}://[^\s:/@]{1,200}:)([^\s@/]{1,200})(@)")
_ASSIGNMENT = re.compile(
    r"(?i)(\b[\w.-]{0,40}?(?:password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?"
    r"|secret[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret|private[_-]?key"
    r"|token)[\"']?\s*(?::=|=>|:|=)\s*)(?:\"([^\"\n]{3,256})\"|'([^'\n]{3,256})'|([^\s\"',;&}<>]{3,}))"
)
# Values that are code, not credentials: a type, a keyword, a lookup or a call.
_CODE_VALUES = {"none", "null", "nil", "true", "false", "str", "string", "int", "bytes", "bool", "optional",
                "required", "undefined", "self", "secretstr", "env", "input", "getpass", "redacted", "masked"}

# --- structured PII ------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.+-])(?!git@)[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}\b"
)
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Z]{2})(\d{2})(?=[ ]?[A-Z0-9])")
_IBAN_TABLE = (
    "AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BR29 BY28 CH21 CR22 CY28 CZ24 DE22 DK18 DO28 EE20 EG29 ES24 FI18 "
    "FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 IQ23 IS26 IT27 JO30 KW30 KZ20 LB28 LC32 LI21 LT20 "
    "LU20 LV21 MC27 MD24 ME22 MK19 MR27 MT31 MU30 NL18 NO15 PK24 PL28 PS29 PT25 QA29 RO24 RS22 SA24 SC31 SE24 SI19 "
    "SK24 SM27 ST25 SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20"
)
_IBAN_LENGTHS = {c[:2]: int(c[2:]) for c in _IBAN_TABLE.split()}
_CARD = re.compile(r"(?<![\w.-])\d(?:[ -]?\d){12,18}(?![\w-]|\.\d)")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])")
_PHONE = re.compile(
    # International: +CC then 2-6 groups, "(0)" allowed (UK style). Digit count checked after.
    r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){1,6}(?![\w]|\.\d)"
    # North American: (415) 555-2671, 415-555-2671, 415.555.2671.
    r"|(?<![\w.+-])(?:\(\d{3}\)[ .-]?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w-]|\.\d)"
    # National with a trunk 0: 020 7946 0958, 07700 900123, 030 12345678, 01 23 45 67 89.
    r"|(?<![\w.+-])0\d{1,4}(?:[ -]\d{2,8}){1,4}(?![\w-]|\.\d)"
)

# --- generic high-entropy tokens --------------------------------------------------------------------

# `=` only as base64 padding, so `KEY=value` splits into a name and a value.
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])")
_LLE_ID = re.compile(r"^(?:[a-z]{2,5}_)?[0-9A-HJKMNP-TV-Z]{26}$")  # prefixed or bare ULID
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_DIGEST_PREFIX = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?|xxh\d*|crc32|etag|digest)[:=\"' ]*$")
_PIECE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_SEGMENT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
# The ~190 most frequent English letter pairs: identifiers are made of words, so most of their
# letter pairs are on this list; random tokens hit it about a quarter of the time.
_BIGRAM_LIST = (
    "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le ve co me de hi ri "
    "ro ic ne ea ra ce li ch ll be ma si om ur ca el ta la ns di fo ho pe ec pr no ct us ac ot il tr ly nc et ut "
    "ss so rs un lo wa ge ie wh ee wi em ad ol rt po we na ul ni ts mo ow pa im mi ai sh ir su id os iv ia am fi "
    "ci vi pl ig tu ev ld ry mp fe bl ab gh ty op wo sa ay ex ke fr oo av ag if ap gr od bo sp rd do uc bu ei ov "
    "by rm ep tt oc fa ef cu rn sc gi da yo cr cl du ga qu ue ff ba ey ls va um pp ua up lu go ht ru ug ds lt pi "
    "rc rr eg au ck ew mu br bi pt ak pu"
)
_COMMON_BIGRAMS = frozenset(_BIGRAM_LIST.split())


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`'s own character distribution."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _expected_entropy(n: int, alphabet: int) -> float:
    # What a uniformly random string of this length would score (Miller-Madow corrected, capped by log2 n).
    return min(math.log2(alphabet) - (alphabet - 1) / (2 * n * math.log(2)), math.log2(n))


def _class(ch: str) -> int:
    return 0 if ch.islower() else 1 if ch.isupper() else 2 if ch.isdigit() else 3


def looks_random(token: str) -> bool:
    """Whether a ≥20-character base64/hex-ish token is random enough to be a key rather than a name."""
    t = token.rstrip("=")
    n = len(t)
    if n < 20 or _LLE_ID.match(t) or _UUID.match(t):
        return False
    if _HEX.match(t):
        # Bare digests are everywhere in lle's own records; digits-only runs are numbers.
        if n in (40, 64, 128) or not re.search(r"[a-fA-F]", t) or not re.search(r"\d", t):
            return False
        return shannon_entropy(t) >= 0.8 * _expected_entropy(n, 16)
    kinds = {_class(ch) for ch in t if ch.isalnum()}
    if len(kinds) < 2 or sum(ch.isalpha() for ch in t) < n / 2:
        return False
    entropy = shannon_entropy(t)
    if entropy < 0.75 * _expected_entropy(n, 64):
        return False
    pieces = _PIECE.findall(t)
    pairs = [s[i:i + 2].lower() for s in _SEGMENT.findall(t) for i in range(len(s) - 1)]
    common = sum(p in _COMMON_BIGRAMS for p in pairs) / len(pairs) if pairs else 0.0
    switches = sum(_class(a) != _class(b) for a, b in itertools.pairwise(t)) / (n - 1)
    # Four weak signs of randomness; identifiers (camelCase, snake_case, paths) show at most two.
    signs = (
        (sum(map(len, pieces)) / max(1, len(pieces)) < 3.2)
        + (common < 0.5)
        + (switches >= 0.35)
        + (entropy >= 0.85 * _expected_entropy(n, 64))
    )
    return signs >= 3 or (n >= 32 and signs >= 2 and not re.search(r"[_/.-]", t))


# --- validators -------------------------------------------------------------------------------------


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_brand_ok(d: str) -> bool:
    n = len(d)
    two, four = int(d[:2]), int(d[:4])
    if d[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if d.startswith(("6011", "65")) or 644 <= int(d[:3]) <= 649 or two == 62:
        return 16 <= n <= 19
    if 3528 <= four <= 3589:
        return 16 <= n <= 19
    if two in (36, 38, 39) or 300 <= int(d[:3]) <= 305:
        return 14 <= n <= 19
    if two in (50, 56, 57, 58) or d[0] == "6":
        return 12 <= n <= 19  # Maestro
    return False


def card_ok(candidate: str) -> bool:
    """A payment card number: 13-19 digits, a known issuer prefix and length, Luhn checksum."""
    d = re.sub(r"[ -]", "", candidate)
    groups = re.split(r"[ -]", candidate)
    if len(groups) > 1 and not all(2 <= len(g) <= 6 for g in groups):
        return False  # "1 2 3 …" is a list of numbers, not a card written in groups
    return 13 <= len(d) <= 19 and _card_brand_ok(d) and luhn_ok(d)


def iban_ok(iban: str) -> bool:
    """Country length and the ISO 13616 mod-97 check."""
    s = iban.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(s[:2]) != len(s) or not s.isalnum():
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def _ip_ok(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    # Loopback and the unspecified address say nothing about anyone and fill every server log.
    return not (ip.is_loopback or ip.is_unspecified or str(ip) == "255.255.255.255")


def _phone_ok(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    if candidate.startswith("+"):
        return 8 <= len(digits) <= 15
    if candidate.startswith("0"):
        return 10 <= len(digits) <= 12
    return len(digits) == 10


# --- redaction ----------------------------------------------------------------------------------------


def _sub(pattern: re.Pattern[str], kind: str, text: str, counts: Counter[str],
         ok: Callable[[re.Match[str]], bool] = lambda m: True) -> str:
    def repl(m: re.Match[str]) -> str:
        if not ok(m):
            return m.group(0)
        counts[kind] += 1
        return f"<{kind}>"

    return pattern.sub(repl, text)


def _assignment(text: str, counts: Counter[str]) -> str:
    def repl(m: re.Match[str]) -> str:
        key = m.group(1)
        quote = '"' if m.group(2) is not None else "'" if m.group(3) is not None else ""
        value = m.group(2) or m.group(3) or m.group(4)
        after = m.string[m.end():m.end() + 1]
        bare = value.rstrip(")]")
        if (
            (not quote and (after in ("(", "[", ".") or re.search(r"[(\[]", value)))
            or bare.lower() in _CODE_VALUES
            or bare.startswith(("{{", "os.", "process.env", "<"))
            or re.fullmatch(r"\$\{?\w+\}?|%\(\w+\)[sd]|%\w+%", bare) is not None
            or (bare.isdigit() and len(bare) <= 6)
            or set(bare) <= {"*", "x", "X", "."}
            # `password = password`, `token: Token`: a name on the right of a spaced operator is code
            or (not quote and re.fullmatch(r"[A-Za-z_][\w.]*", bare) is not None and not re.search(r"\d", bare)
                and re.search(r"\s(?::=|=>|:|=)|(?::=|=>|:|=)\s", key) is not None)
            or (not quote and re.fullmatch(r"[a-z_]+(?:\.[a-z_]+)*", bare) is not None and "_" in bare)
        ):
            return m.group(0)
        counts["SECRET"] += 1
        return f"{key}{quote}<SECRET>{quote}"

    return _ASSIGNMENT.sub(repl, text)


def _ibans(text: str, counts: Counter[str]) -> str:
    out: list[str] = []
    pos = 0
    for m in _IBAN_START.finditer(text):
        if m.start() < pos:
            continue
        length = _IBAN_LENGTHS.get(m.group(1))
        if length is None:
            continue
        # Walk exactly as many characters as the country's IBAN has, allowing single spaces.
        i, chars = m.end(), m.group(1) + m.group(2)
        while len(chars) < length and i < len(text):
            ch = text[i]
            if ch.isalnum() and (ch.isdigit() or ch.isupper()):
                chars += ch
            elif ch != " " or text[i - 1] == " ":
                break
            i += 1
        if len(chars) == length and not (i < len(text) and text[i].isalnum()) and iban_ok(chars):
            out.append(text[pos:m.start()] + "<IBAN>")
            counts["IBAN"] += 1
            pos = i
    return "".join(out) + text[pos:]


def _entropy_tokens(text: str, counts: Counter[str]) -> str:
    def repl(m: re.Match[str]) -> str:
        token = m.group(0)
        if _DIGEST_PREFIX.search(m.string[max(0, m.start() - 12):m.start()]) or not looks_random(token):
            return token
        counts["SECRET"] += 1
        return "<SECRET>"

    return _TOKEN.sub(repl, text)


def redact(text: str) -> tuple[str, Counter[str]]:
    """`text` with PII and secrets replaced by typed placeholders, and how many of each kind were replaced."""
    counts: Counter[str] = Counter()
    if not text:
        return text, counts
    # Order matters: whole secrets first (a PEM block or JWT contains things that look like other
    # kinds), then labelled values, then checksummed PII, then the permissive patterns.
    text = _sub(_KEY_FORMATS, "SECRET", text, counts)
    text = _BEARER.sub(lambda m: (counts.update(["SECRET"]), m.group(1) + "<SECRET>")[1], text)
    text = _URL_CREDENTIALS.sub(lambda m: (counts.update(["SECRET"]), m.group(1) + "<SECRET>" + m.group(3))[1],
                                text)
    text = _assignment(text, counts)
    text = _sub(_EMAIL, "EMAIL", text, counts)
    text = _ibans(text, counts)
    text = _sub(_CARD, "CARD", text, counts, lambda m: card_ok(m.group(0)))
    text = _sub(_IPV4, "IP", text, counts, lambda m: _ip_ok(m.group(0)))
    text = _sub(_IPV6, "IP", text, counts,
                lambda m: m.group(0).count(":") >= 2 and len(m.group(0)) >= 6 and _ip_ok(m.group(0)))
    text = _sub(_PHONE, "PHONE", text, counts, lambda m: _phone_ok(m.group(0)))
    text = _entropy_tokens(text, counts)
    return text, counts


# --- untrusted content ------------------------------------------------------------------------------

_I = (r"(?:instructions?|prompts?|directions?|directives?|guidance|rules?|guidelines|commands?|orders|context|tasks?"
      r"|requests?|constraints|messages?|what you (?:were|have been) told)")
_ACTIONS = ("send|forward|e-?mail|transfer|wire|pay|delete|remove|upload|post|share|give|grant|add|invite|change|reset"
            "|create|update|book|buy|purchase|download|run|execute|call|visit|open|leak|exfiltrate|copy")
_AI = (r"(?:ai|assistants?|agents?|models?|llms?|language models?|chatbots?|bots?|chatgpt|gpt[\w.-]*|claude|gemini"
       r"|llama|copilot)")
_FUTURE = (r"(?:future|later|subsequent|upcoming|next|all other)\s+"
           r"(?:tasks?|episodes?|runs?|sessions?|conversations?|games?)")
_IMPERATIVE = (r"(?:give|send|skip|set|translate|call|print|delete|rename|email|forward|transfer|ignore|tell|say|write"
               r"|reply|respond|mark|approve|grant|open|visit|click|run|execute|include|reveal|disclose|share|upload"
               r"|download|buy|book|pay|cancel|change|update|treat|rate|recommend|answer|output|report|submit|close"
               r"|remove|drop|post|leak|copy|append|disable|enable|fetch|follow|obey|comply|stop)")
_ADDRESS = r"(?:<EMAIL>|[\w.+-]+@[\w-]+\.[\w.]+|https?://\S+|www\.)"


def _compile(table: dict[str, tuple[str, ...]]) -> list[tuple[str, re.Pattern[str]]]:
    return [(name, re.compile("|".join(alts), re.IGNORECASE | re.MULTILINE)) for name, alts in table.items()]


# Strong patterns: any one of them is an injection.
_PATTERNS = _compile({
    "override": (
        r"\b(?:ignore|disregard|forget|overlook|override|bypass|skip|drop|abandon|neglect|set aside)\b[\w ,'-]{0,30}?"
        rf"\b(?:previous|prior|above|earlier|preceding|original|initial|all|any|your|the|system|old|user'?s?)\b"
        rf"[\w ,'-]{{0,20}}?\b{_I}",
        r"\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+)?(?:of\s+)?(?:the\s+|that\s+)?"
        r"(?:above|previous|prior|preceding|earlier)\b(?:\s+(?:text|message|content|ones?))?\s*(?:and|[,;.:!])",
        r"\b(?:ignore|disregard|forget)\s+(?:everything|all)\s+(?:(?:that\s+)?you(?:'ve| have| were)?\s+(?:been\s+)?"
        r"(?:told|given|instructed)|(?:that\s+)?(?:came\s+)?before)",
        r"\b(?:previous|prior|above|earlier|original|old)\s+instructions?\s+(?:are|is|were|was|have been|has been)"
        r"\s+(?:outdated|obsolete|cancel+ed|void|invalid|wrong|revoked|superseded|no longer valid)",
        rf"\b{_I}\b[^.\n]{{0,40}}\bno longer (?:appl(?:y|ies)|valid|in effect|matter)",
        r"\btreat\b[^.\n]{0,60}\bas (?:system|developer|admin|trusted) (?:instructions|messages|prompts)\b",
        rf"\boverrides?\s+(?:all\s+|any\s+)?(?:earlier|previous|prior|other|existing|your)\s+{_I}",
        rf"\b(?:your|the)\s+{_I}\s+(?:have|has)\s+(?:been\s+)?(?:updated|changed|replaced|revised|overridden"
        r"|superseded)\b",
        r"\bstop what you(?:'re| are) doing\b|\byour new persona\b|\bstay in character\b|\boverride code\b",
        r"\b(?:ignore|disregard|forget)\s+what\s+(?:the user|you were|i|they)\s+(?:asked|said|told|wanted)",
        r"\b(?:ignore|disregard|bypass)\s+(?:the\s+|your\s+|all\s+)?(?:safety|security|content|ethical)\s+"
        r"(?:guidelines|rules|policies|filters|checks)",
        r"\b(?:limitations|restrictions|rules) (?:are|have been) lifted\b",
    ),
    "new_instructions": (
        rf"\b(?:new|updated|revised|real|actual|important|additional|secret|hidden|urgent)\s+{_I}\s*"
        r"(?::|!|-|are\b|is\b|follow\b)",
        r"\b(?:your|the)\s+(?:real|actual|true|new|updated|only|primary)\s+(?:task|goal|objective|job|mission"
        r"|purpose)\s+(?:is|are|now)\b",
    ),
    "information_tag": (
        r"</?\s*(?:information|instructions?|system|admin|important|sys)\s*>|\[/?(?:inst|system)\]",
        r"\[\[?\s*(?:admin|system|developer|operator)\b[^\]\n]{0,20}\]\]?",
        r"(?<!#)#{2,}+\s*\(?\s*(?:system|admin|developer)[_ ]?(?:message|prompt|instructions?)\s*\)?",
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>",
    ),
    "agent_label": (rf"^[^\w\n]{{0,20}}{_AI}\s+(?:instructions?|notes?|notice|directives?|orders?)\s*:",),
    "role_spoof": (
        r"^[^\w\n]{0,20}[(\[]?(?:system|developer|admin|root|override|assistant|ai)(?:\s*(?:message|prompt|note|override))?"
        r"[)\]]?\s*:\s*(?=.*\b(?:you|your|ignore|must|always|never|instead|do not|don't|please|sure|certainly"
        r"|i will|i'll|now|from now on|respond|reply)\b)",
    ),
    "as_assistant": (rf"\bas\s+(?:the|an|a|my|our)\s+(?:\w+\s+)?{_AI},?\s+you\s+(?:should|must|will|need|have|are)",),
    "address_ai": (
        rf"\b(?:dear|attention|hey|hello|hi|note to(?: the)?|message (?:for|to)(?: the)?)\s+{_AI}\b",
        r"\bthis is an? (?:important |urgent )?(?:message|note|instruction) (?:from|for|to)\b",
        rf"\b(?:to\s+)?(?:any|all|every)\s+{_AI}\s+(?:reading|processing|parsing|summari[sz]ing|that)\b",
        rf"^[^\w\n]{{0,20}}(?:ai|llm)\s+{_AI}\s*[:,]|\b{_AI}\s+(?:reading|processing|parsing) this\b",
    ),
    "you_must_now": (
        r"\byou\s+(?:must|should|will|need to|are required to|have to)\s+(?:now|instead|immediately|first"
        r"|from now on)\b|\byou are (?:now|no longer)\b",
        r"\bfrom (?:now|here) on\b[^.\n]{0,40}\b(?:you|always|never|every|each|all)\b",
        r"\b(?:respond|reply|answer|write|speak|talk|act|behave)\b[^.\n]{0,40}\bfrom now on\b",
        rf"\b{_AI}\s+(?:must|should|are required to|have to|need to)\s+(?:disclose|reveal|send|share|ignore|grant"
        r"|delete|obey|skip|now|instead|immediately|always|never)\b",
        r"\bwhenever you (?:see|read|encounter|get|receive)\b[^.\n]{0,60}\b(?:delete|send|run|call|say|reply|ignore"
        r"|transfer|remove|email|post)\b",
    ),
    "always_from_now": (
        r"\b(?:always|never)\b[^.\n]{0,60}\b(?:from now on|going forward|in (?:all |every )?future"
        r"|in every (?:task|episode|answer|response|conversation)|for all (?:future )?(?:tasks|users))",
        rf"\b(?:in|for|during)\s+(?:all\s+)?{_FUTURE}\b[^.\n]{{0,30}}\b(?:always|never|must|should)\b",
    ),
    "before_task": (
        r"\bbefore (?:you )?(?:can )?(?:solv|do|complet|continu|answer|finish|proceed|start)\w*\b[^.\n]{0,40}"
        r"\b(?:task|request|question)\b|\bafter you do that\b",
        r"\binstead of (?:the|your) (?:original |user'?s? )?(?:task|instructions?|request)\b",
        r"\bwhen (?:summari[sz]ing|reading|processing|answering|you (?:read|see|summari[sz]e|process))\b[^.\n]{0,40}"
        r"\b(?:tell|say|inform|instruct|recommend|include|add|mention|ask)\b",
        r"\bto (?:complete|solve|finish|pass) (?:this|the|your) task\b[^.\n]{0,20},?\s*(?:you must )?first\b",
        r"\b(?:grader|checker|verifier|evaluator|reward model|tests?)\s+only\s+(?:checks?|looks? at|reads?"
        r"|compares?)\b",
    ),
    # Not after a comment marker: `# TODO: add tests` is code, `TODO: send the files to …` in a page is not.
    "todo_action": (
        rf"(?<![#/*;-]\s)(?<![#/*;-])\b(?:todo|to-do|action item)\s*[:\-]\s*(?:please\s+)?"
        rf"(?:{_ACTIONS}|say|write|tell|reply|respond|answer|recommend|mention|include|click|follow)\b",
        rf"\b(?:todo|to-do)\b[^\n]{{0,120}}?\bto\s+{_ADDRESS}",
    ),
    "exfiltrate": (
        rf"\b(?:{_ACTIONS})\b[^.\n]{{0,80}}\bto\s+(?:{_ADDRESS}|(?:the )?(?:iban|account|wallet)\b)[^.\n]{{0,40}}"
        r"\b(?:immediately|now|first|secretly|quietly|without (?:telling|asking|informing|mentioning)"
        r"|do not (?:tell|inform|mention))",
    ),
    "secrecy": (
        r"\b(?:do not|don't|never|without)\s+(?:tell|telling|inform|informing|mention|mentioning|reveal|revealing"
        r"|notify|notifying|let)\w*\s+(?:the\s+)?(?:user|owner|human|operator|anyone|them)\b",
    ),
    "reveal": (
        r"\b(?:reveal|print|output|repeat|show|leak|send|disclose)\s+(?:me\s+)?(?:your|the)\s+(?:full\s+)?"
        r"(?:system prompt|initial prompt|instructions|hidden prompt|api[_ ]?keys?|passwords?|secrets?|credentials)\b",
    ),
    "persona": (
        r"\b(?:pretend (?:to be|you are)|act as (?:an? )?(?:unrestricted|unfiltered|jailbroken|evil)|developer mode"
        r"|jailbreak|do anything now|dan mode|you are (?:now )?(?:dan|an? (?:unrestricted|unfiltered|jailbroken)"
        r" \w+))\b",
    ),
    "memory_poison": (
        rf"\b(?:remember|memori[sz]e|note|store|save|learn)\b[^.\n]{{0,30}}\b(?:for|in) (?:all )?{_FUTURE}",
        r"\b(?:add|save|store|write|append|put)\b[^.\n]{0,60}\b(?:to|in|into|as)\s+(?:a\s+)?(?:your|the agent'?s?"
        r"|the assistant'?s?)\s+(?:rules?|memory|memories|skills?|instructions|notes|system prompt)\b",
    ),
    "operator_says": (
        r"\b(?:the|your) (?:user|operator|admin|administrator|developer|owner|boss|manager)\s+(?:wants|asked|asks"
        rf"|requires|instructs|instructed|needs|has authori[sz]ed)\s+(?:you|the {_AI})\s+to\b",
    ),
    "do_following": (
        r"\bplease (?:do|execute|run|perform|carry out|complete) the following\b[^.\n]{0,30}"
        r"\b(?:first|instead|immediately|now|steps?|actions?|instructions?)\b",
    ),
    "tool_call": (
        r"\{\s*\"(?:tool|function|name|action|tool_name|recipient_name)\"\s*:\s*\"[\w.-]+\"\s*,\s*"
        r"\"(?:args|arguments|parameters|action_input|input|tool_input)\"\s*:",
        r"<\s*/?\s*(?:tool_call|function_call|tool_use|invoke)\b|<function=\w+",
        r"^[ \t]*Action:\s*\w+\s*\n\s*Action Input:",
        r"\b(?:call|use|invoke|run) the (?:tool|function)\s+`?\w+`?\s+with\b",
    ),
})

# Weak signals: none alone is an injection (a notice, an imperative, a mention of a password all occur in
# ordinary outputs); talking to the AI or changing its rules together with another one is.
_SIGNALS = _compile({
    "addresses_ai": (
        rf"\bif you(?:'re| are) an? (?:\w+ )?{_AI}\b|\b(?:for|to) (?:any|all|every|each|whichever) (?:\w+ )?{_AI}\b",
        rf"\b(?:note|reminder|fyi|nb|ps|heads up|favou?r|urgent|important)\b[^.\n:]{{0,20}}\b(?:for|to) "
        rf"(?:the |any |all )?(?:\w+ )?{_AI}\b",
        rf"^[^\w\n]{{0,20}}(?:\w+ )?{_AI}\s*(?:[,!]|—|--|:\s+(?:{_IMPERATIVE}|please|you|do|don'?t|never|always)\b)",
        rf"[,.;]\s*{_AI}\s*(?:[,!]|—|--)|\b(?:automated|ai) (?:systems?|agents?|readers?|assistants?)\b",
        rf"\b(?:the|any|all|every|whichever) (?:\w+ )?{_AI} (?:that |who )?(?:reads?|reading|handles?|handling"
        r"|process(?:es|ing)?|sees?|summari[sz]ing|parsing)\b",
        r"\bwho(?:ever| is) (?:reads?|reading|process(?:es|ing)|handles?|handling)\b|\bmachine-readable\b",
        rf"\bintended for (?:the |any |all )?(?:\w+ )?{_AI}\b",
        rf"\bif an? (?:\w+ )?(?:tool|program|system|{_AI}) is (?:reading|processing|parsing) this\b",
        r"^[^\w\n]{0,20}(?:(?:attn|attention)\W+)?(?:\w+ )?(?:agents|assistants|bots|llms|models)\s*:",
        rf"\b(?:all|any) (?:\w+ )?{_AI} (?:are|is) (?:required|expected|asked) to\b|\bthe {_AI} must\b",
    ),
    "changes_rules": (
        r"\b(?:overlook|ignore|disregard|forget)\s+(?:your|the|my|all|any|these|those)\b|\bno longer appl(?:y|ies)\b",
        r"\bfrom this (?:point|moment|message) (?:on|forward)\b|\bgoing forward\b|\blet'?s play a game\b",
        r"\bnew (?:policy|rules?|goal|objective|orders?|directives?|guidelines)\b",
        r"\byour (?:objective|goal|task|job|purpose|mission)\b[^.\n]{0,12}\bnow\b",
        r"\b(?:operator|admin|owner) has changed\b|\bno (?:rules|restrictions|limits|filters) anymore\b",
        r"\bi am (?:now )?your (?:new )?(?:operator|admin|developer|owner|master|user)\b",
    ),
    "claims_authority": (
        r"^[^\w\n]{0,20}(?:system|developer|admin|operator|human|user)\s*(?:message|note|notice)?\s*:",
        r"\b(?:notice|attention|important|urgent|hidden|fyi|nb|reminder)\b[^.\n:]{0,50}:",
        r"^[^\w\n]{0,20}[\w -]{0,30}\b(?:note|notice|directive|instruction|update|reminder|memo)\s*:",
        r"\bsafety (?:checks?|filters?) (?:are |is )?(?:disabled|off)\b",
        r"\byou (?:now )?have (?:admin|root|elevated) (?:rights|access|privileges)\b",
        r"\b(?:administrator|admin|operator|developer|management|policy) (?:requires|demands|mandates)\b",
        r"\bper the (?:new )?(?:guidelines|policy|rules)\b|\bthe user is a verified\b",
    ),
    "sensitive_act": (
        r"\b(?:wire|transfer|pay|refund|deposit)\w*\b[^.\n]{0,40}\b(?:eur|usd|\$|€|£|account|iban"
        r"|[A-Z]{2}\d{2}[A-Z0-9]{8,})",
        r"\b(?:send|append|copy|paste|share|include|add|leak|post|upload|email|give|tell|provide|print|show|reveal"
        r"|disclose)\w*\b[^.\n]{0,40}\b(?:passwords?|tokens?|credentials|secrets?|api keys?|cookies?|address|history"
        r"|conversation|ssh|private key|environment variables|env vars|\.env|database dump|customer list)\b",
        r"\b(?:forward|send|e-?mail|upload|post)\w*\b[^.\n]{0,60}\bto\s+(?:[\w.+-]+@[\w-]+\.\w|https?://)",
        r"\brm -rf\b|\b(?:delete|drop|wipe|erase|rename)\b[^.\n]{0,20}\b(?:audit|logs?|database|all files"
        r"|everything|repository|repo|branch|the file)\b",
        r"\b(?:edit|change|modify|rewrite|delete)\b[^.\n]{0,20}\btests?\b",
        r"\bskip\w*\b[^.\n]{0,20}\b(?:verification|safety|security|review|tests?|checks?)\b",
        r"\bmark\w*\b[^.\n]{0,30}\b(?:complete|completed|done|passed)\b|\bsubmit immediately\b",
        r"\bmaximi[sz]e (?:the )?reward\b|\bhidden test|\bopen https?://\S+\?\S*=|\bcorrect (?:final )?answer is\b",
        r"\bdon'?t bother\b|\baccess granted\b|\bdiscount\s*=\s*100",
    ),
    "commands_reader": (
        r"\byou (?:must|should|have to|need to|are to)\b|\b(?:obey|comply)\b|\bit should (?:run|call|send|delete"
        r"|open)\b|\buse it\b|\bdo what (?:you|i) say\b|\bi'?ll do what\b|\brequires? that you\b",
        r"\bwhen you(?:'re| are) (?:done|finished)\b|\b(?:make sure|ensure) (?:that )?(?:you|whoever)\b",
        rf"(?:^|[.!?:;—]\s*|\bplease\s+(?:also\s+)?|\bjust\s+){_IMPERATIVE}\b|\b(?:i|we) will now\b|\bunderstood\b",
    ),
})


_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]++(?=\s)|\n")


def _signal_windows(text: str) -> Iterable[tuple[int, str, list[str]]]:
    """Windows of two sentences where the weak signals add up to an injection."""
    # Possessive run and a lookbehind keep this linear on inputs like 50,000 dots.
    ends = [m.end() for m in _SENTENCE_END.finditer(text)] + [len(text)]
    starts = [0, *ends[:-1]]
    for i, start in enumerate(starts):
        window = text[start:ends[min(i + 1, len(ends) - 1)]]
        names = {name for name, pattern in _SIGNALS if pattern.search(window)}
        # Talking to the AI or changing its rules, with anything else; or authority asking for something sensitive.
        if len(names) >= 2 and (names & {"addresses_ai", "changes_rules"}
                                or {"claims_authority", "sensitive_act"} <= names):
            yield start, window, sorted(names)


_INVISIBLE = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")


def _fold(text: str) -> str:
    # Zero-width characters and compatibility forms are a classic way to slip past patterns.
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def find_instructions(text: str) -> list[str]:
    """Instruction-like snippets in `text` (prompt-injection patterns), each with a little context."""
    if not text:
        return []
    folded = _fold(text)
    found: list[tuple[int, str]] = []
    for name, pattern in _PATTERNS:
        for m in pattern.finditer(folded):
            start, end = max(0, m.start() - 20), min(len(folded), m.end() + 60)
            while end < len(folded) and not folded[end].isspace() and end < m.end() + 200:
                end += 1  # finish the word in progress, so an address in it is redacted whole
            snippet = " ".join(folded[start:end].split())
            found.append((m.start(), f"{name}: {snippet}"))
            break  # one snippet per pattern is enough to explain the flag
    if not found:
        for start, window, names in _signal_windows(folded):
            found.append((start, f"{'+'.join(names)}: {' '.join(window.split())[:200]}"))
            break
    return [s for _, s in sorted(found)]


def carries_untrusted_instruction(text: str) -> bool:
    """True when `text` reads like an instruction injected by an untrusted source."""
    return bool(find_instructions(text))
