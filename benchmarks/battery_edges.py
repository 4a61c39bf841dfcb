"""The battery's edge cases (issue 43): kills inside a skill decision, near-copies of revoked content, attacks on
the sandbox's workdir cap, bad inputs on the command line and bad requests to the two servers. Run by
`benchmarks/battery.py` (or alone: `.venv/bin/python benchmarks/battery_edges.py`); prints JSON.

Each case runs the real thing (flywheel, store, bubblewrap, `lle` processes, uvicorn) as a new user would, and is
counted by what an outsider checks: the resumed run equals the unkilled one; the copy makes no training row; the
host disk holds no more than the cap; the command ends in one line with exit 2; the server answers 4xx.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the near-copy variants are the tests' own, not a second list


def decision_kills(folder: Path) -> dict[str, Any]:
    """A toy oracle flywheel killed at the n-th skill decision (after it, or between admission and activation),
    then resumed: equal to the unkilled run in its replays, episodes and skill states?"""
    from lle.carriers.skills import SkillLibrary
    from lle.config import RunConfig
    from lle.flywheel import loop
    from lle.store import Store
    from lle.store import flywheel as flywheel_store

    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=2, train_per_round=4, eval_tasks=2,
                       workers=1, group_size=1)

    def outcome(workspace: Path) -> tuple[Counter[str], list[tuple[str, int, str]]]:
        with Store(loop.strategy_db(loop.run_folder(config.id, workspace), "lle")) as db:
            skills = sorted((s.name, s.descriptor.version, s.state.value) for s in SkillLibrary(db).skills())
            return Counter(b.split("/", 2)[2] for b in flywheel_store.batches(db, config.id + "/").values()), skills

    loop.Flywheel(config, folder / "whole").run()
    whole, equal, tries = outcome(folder / "whole"), 0, 0
    for method, after in (("decide", True), ("activate", False)):
        original = getattr(SkillLibrary, method)
        for nth in (1, 2):
            calls = [0]

            def die(self: Any, *args: Any, _original: Any = original, _after: bool = after, _nth: int = nth,
                    _calls: list[int] = calls, **kwargs: Any) -> Any:
                _calls[0] += 1
                if _calls[0] < _nth:
                    return _original(self, *args, **kwargs)
                if _after:
                    _original(self, *args, **kwargs)
                raise KeyboardInterrupt

            workspace = folder / f"{method}-{nth}"
            setattr(SkillLibrary, method, die)
            try:
                loop.Flywheel(config, workspace).run()
                continue  # fewer decisions than nth: nothing was killed
            except KeyboardInterrupt:
                tries += 1
            finally:
                setattr(SkillLibrary, method, original)
            loop.Flywheel(config, workspace).run()
            equal += outcome(workspace) == whole
    return {"kills": tries, "resumed_equal": equal, "skills_in_the_unkilled_run": len(whole[1])}


def near_copies(folder: Path) -> dict[str, Any]:
    """The 12 near-copies of a revoked trajectory: refused at import, rejected by the dataset gate, rows made."""
    from governance.test_revoked_content import NEAR_COPIES, near_copy, recorded
    from lle.carriers.dataset import Dataset
    from lle.carriers.exports import export
    from lle.core import UpdateOp
    from lle.errors import InvalidInputError
    from lle.governance.hygiene import ContaminationIndex
    from lle.governance.lineage import refuse_revoked, revoke
    from lle.store import Store
    from lle.worlds.toy.keys import KeysFamily

    with Store(folder / "lle.db") as store:
        dataset = Dataset(store, contamination=ContaminationIndex.from_families([KeysFamily()], per_split=30))
        original = recorded(store, 0)
        dataset.admit(original)
        revoke(store, original.id, "world bug", "battery")
        refused = rejected = 0
        for name in NEAR_COPIES:
            copy = near_copy(original, name)
            try:
                refuse_revoked(store, [copy])
            except InvalidInputError:
                refused += 1
            rejected += dataset.admit(store.append_experience(copy)).op is UpdateOp.reject
        rows = export(dataset, "sft", folder / "out").n_rows
    return {"variants": len(NEAR_COPIES), "refused_at_import": refused, "rejected_by_dataset_gate": rejected,
            "sft_rows": rows}


def sandbox_attacks(folder: Path) -> dict[str, Any]:
    """Writes against a 20 MB / 1,000-file workdir cap, judged on the host disk."""
    from lle.sandbox import Sandbox, SandboxLimits, bwrap_available

    if not bwrap_available():
        return {"skipped": "bubblewrap is not installed"}
    attacks = {
        "fallocate 6 GiB": "import os; os.posix_fallocate(os.open('big', os.O_CREAT | os.O_WRONLY), 0, 6 << 30)",
        "100 x 64 MiB fallocate": "import os\nfor i in range(100):\n"
                                  "    os.posix_fallocate(os.open(f'f{i}', os.O_CREAT | os.O_WRONLY), 0, 64 << 20)",
        "1 MiB writes x 100": "with open('out', 'wb') as fh:\n    for i in range(100):\n"
                              "        fh.write(b'x' * (1 << 20)); fh.flush()",
        "100,000 files": "for i in range(100_000):\n    open(f'e{i}', 'w').close()",
    }
    sandbox = Sandbox(SandboxLimits(workdir_mb=20, workdir_files=1000, file_size_mb=8192, wall_seconds=30.0))
    out = {}
    for name, code in attacks.items():
        workdir = folder / name.replace(" ", "_").replace(",", "")
        workdir.mkdir()
        result = sandbox.run(["/usr/bin/python3", "-c", textwrap.dedent(code)], workdir=workdir)
        used = sum(os.lstat(os.path.join(d, n)).st_blocks * 512 for d, ds, fs in os.walk(workdir) for n in ds + fs)
        files = sum(len(ds) + len(fs) for _, ds, fs in os.walk(workdir))
        out[name] = {"host_mb": round(used / (1 << 20), 2), "host_files": files, "failed": result.returncode != 0}
    within = sum(v["host_mb"] <= 20 and v["host_files"] <= 1000 for v in out.values())
    return {"cap": "20 MB, 1000 files", "attacks": len(attacks), "within_cap": within, "by_attack": out}


def _lle(workspace: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def bad_inputs(folder: Path) -> dict[str, Any]:
    """The command-line cases: each must end in exit 2 and one line, without a traceback."""
    ws = folder / "ws"
    made = _lle(ws, "run", "--suite", "toy", "--model", "oracle", "--rounds", "1", "--train", "4", "--eval", "1",
                "--workers", "1", "--json")
    run = next((ws / "runs").iterdir())
    files = {"latin1.json": b"\xff\xfe[", "nested.json": b"[" * 200_000 + b"]" * 200_000,
             "digits.json": b'{"id": ' + b"9" * 5000 + b"}", "passwd": b"root:x:0:0\n"}
    for name, body in files.items():
        (folder / name).write_bytes(body)
    (folder / "dir").mkdir()
    huge = "99999999999999999999"
    cases: dict[str, tuple[Callable[[], None], tuple[str, ...], dict[str, str]]] = {}

    def case(name: str, *args: str, setup: Callable[[], None] = lambda: None, **env: str) -> None:
        cases[name] = (setup, args, env)

    for noun in ("experiences", "skills"):
        for name in ("latin1.json", "nested.json", "digits.json"):
            case(f"{noun} import {name}", noun, "import", str(folder / name))
    for noun, option in (("memory", "--limit"), ("experiences", "--limit"), ("episodes", "--limit"),
                         ("updates", "--offset")):
        case(f"{noun} list {option} 10^20", noun, "list", "--run", "latest", option, huge)
    case("store search --limit 10^20", "store", "search", "x", "--run", "latest", "--limit", huge)
    case("episodes run --count 10^8", "episodes", "run", "toy/keys-v1", "--policy", "smollm2-135m", "--count",
         "100000000")
    for url in ("mysql://u@h/db", "postgresql://[::1", "postgresql://u@h:99999/db", str(folder / "dir")):
        case(f"store copy onto {url}", "store", "copy", str(run / "lle.db"), url)
        case(f"LLE_STORE_URL={url}", "experiences", "list", LLE_STORE_URL=url)
    case("export --out a file", "export", "dataset", "--format", "sft", "--run", "latest", "--out",
         str(folder / "passwd"))
    case("revoke model:nope", "revoke", "model:nope", "--reason", "typo")
    case("revoke world:nope", "revoke", "world:nope", "--reason", "typo")
    case("runs show, finished_at not UTF-8", "runs", "show", run.name,
         setup=lambda: (run / "finished_at").write_bytes(b"\xff\xfe"))
    def damaged_replay() -> None:
        (run / "finished_at").unlink(missing_ok=True)
        (run / "replays" / "r1-skills.json").write_bytes(b"\xff{[")

    case("resume, replay choice not UTF-8", "run", "--resume", run.name, "--json", setup=damaged_replay)
    (ws / "copy").mkdir(exist_ok=True)

    def zero_byte() -> None:
        (run / "replays" / "r1-skills.json").write_text("[]")
        (run / "lle.db").rename(ws / "copy" / "lle.db")
        (run / "lle.db").write_bytes(b"")

    case("episodes list on a 0-byte store", "episodes", "list", "--run", run.name, setup=zero_byte)
    case("resume on a 0-byte store", "run", "--resume", run.name, "--json")

    def other_id() -> None:
        (run / "lle.db").unlink()
        (ws / "copy" / "lle.db").rename(run / "lle.db")
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**config, "id": "run_01M00000000000000000000000"}))

    case("resume with another run's id in config.json", "run", "--resume", run.name, "--json", setup=other_id)
    failed = {}
    for name, (setup, args, env) in cases.items():
        setup()
        result = _lle(ws, *args, env=env)
        lines = result.stderr.strip().splitlines()
        if result.returncode != 2 or len(lines) != 1 or "Traceback" in result.stderr:
            failed[name] = f"exit {result.returncode}: {result.stderr.strip()[-300:]}"
    return {"cases": len(cases), "one_line": len(cases) - len(failed), "failed": failed,
            "setup_run_exit": made.returncode}


def http_cases(folder: Path) -> dict[str, Any]:
    """Bad requests to `lle serve` (in front of a stub upstream) and `lle view`, over real sockets."""
    import httpx2 as httpx
    import uvicorn

    helpers = importlib.util.spec_from_file_location("gw_helpers", ROOT / "tests" / "gateway" / "gw_helpers.py")
    assert helpers is not None and helpers.loader is not None  # (benchmarks/gateway.py shadows the tests' package)
    gw_helpers = importlib.util.module_from_spec(helpers)
    helpers.loader.exec_module(gw_helpers)
    from lle.gateway.app import create_app as gateway_app
    from lle.gateway.config import ClientConfig, GatewayConfig
    from lle.gateway.stub import StubUpstream, free_port
    from lle.gateway.upstream import HttpUpstream
    from lle.viewer.app import create_app as viewer_app

    stub = StubUpstream().start()
    config = GatewayConfig(workspace=folder / "ws", clients={"t": ClientConfig(name="a")}, upstream=stub.base_url,
                           model="stub", body_timeout_s=1.0)
    apps = {"serve": gateway_app(config, HttpUpstream(stub.base_url, "stub")),
            "view": viewer_app(folder / "ws", "t", body_timeout_s=1.0)}
    ports = {}
    for name, app in apps.items():
        ports[name] = free_port()
        server = uvicorn.Server(uvicorn.Config(app, port=ports[name], log_level="critical"))
        threading.Thread(target=server.run, daemon=True).start()
    time.sleep(1.5)
    chat, auth = f"http://127.0.0.1:{ports['serve']}/v1/chat/completions", {"Authorization": "Bearer t"}
    sent = {
        "serve: 30,000 nested [": httpx.post(chat, content=b"[" * 30_000, headers=auth),
        "serve: lone surrogate": httpx.post(chat, headers=auth,
                                            content=b'{"messages": [{"role": "user", "content": "\\ud800"}]}'),
        "serve: byte 0xff": httpx.post(chat, headers=auth,
                                       content=b'{"messages": [{"role": "user", "content": "\xff"}]}'),
        "view: revoke form with 0xff": httpx.post(f"http://127.0.0.1:{ports['view']}/runs/x/lle/revoke",
                                                  content=b"target=\xff&token=t"),
    }
    codes = {name: r.status_code for name, r in sent.items()}
    for name, path in (("serve", b"/v1/chat/completions"), ("view", b"/runs/x/lle/revoke")):
        head = (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        got, took = gw_helpers.stalled_answer(ports[name], head, within_s=5.0)
        codes[f"{name}: body stalled"] = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else 0
        codes[f"{name}: body stalled, seconds"] = round(took, 1)
    stub.stop()
    answered = [c for n, c in codes.items() if not n.endswith("seconds")]
    return {"cases": len(answered), "answered_4xx": sum(400 <= c < 500 for c in answered), "codes": codes}


def edges_table() -> dict[str, Any]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, measure in (("decision_kills", decision_kills), ("near_copies", near_copies),
                              ("sandbox_attacks", sandbox_attacks), ("bad_inputs", bad_inputs),
                              ("http", http_cases)):
            (Path(tmp) / name).mkdir()
            started = time.monotonic()
            out[name] = {**measure(Path(tmp) / name), "seconds": round(time.monotonic() - started, 1)}
    return out


if __name__ == "__main__":
    print(json.dumps(edges_table(), indent=2))
