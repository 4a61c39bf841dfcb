"""File worlds for code tasks: a small repo in a fresh temp workdir, its tools, and its test anchor.

The anchor (`verify`) never trusts the workdir: it copies only the files the task allows editing
into a new temp folder next to pristine copies of everything else, binds all of it read-only in
the sandbox, and runs `runner.py` there with the visible cases plus hidden variants. The runner
reports what each call returned; pass or fail is decided here, on the host, against expected
values that never enter the sandbox, and only when the runner's completion record carries the
random nonce this run sent it.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
import stat
import tempfile
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import JsonValue

from lle.core import ActionRequest, Outcome, ToolSpec, WorldStep, canonical_json
from lle.errors import InvalidInputError, SandboxUnavailableError, WorldError
from lle.sandbox import Sandbox, SandboxLimits, read_file_nofollow
from lle.worlds.base import AnchorResult, BaseWorld
from lle.worlds.code.runner import DONE_MARK, MAX_VALUE_CHARS, decode

RUNNER = Path(__file__).with_name("runner.py")
RUNNER_NAME = "_lle_runner.py"
"""Where the runner lies in the anchor's folder (read-only there; never in the agent's workdir)."""
PYTHON = "/usr/bin/python3"
LIMITS = SandboxLimits(cpu_seconds=6, memory_mb=768, file_size_mb=8, max_processes=16, wall_seconds=8.0,
                       max_output_bytes=1 << 20)
CHILD_DEADLINE_S = 5.0
CASE_SECONDS = 1.0
MAX_FILE_BYTES = 200_000
MAX_SHOWN_FAILURES = 6

_PATH = {"type": "string", "minLength": 1, "maxLength": 200, "format": "path"}
TOOLS = [
    ToolSpec(name="list_files", description="List the files in the repository.", permissions=["read"]),
    ToolSpec(name="read_file", description="Show the text of a file.", permissions=["read"],
             parameters={"type": "object", "properties": {"path": _PATH}, "required": ["path"],
                         "additionalProperties": False}),
    ToolSpec(name="write_file", description="Create or replace a file with `content`.", permissions=["write"],
             parameters={"type": "object", "properties": {"path": _PATH,
                                                          "content": {"type": "string", "maxLength": MAX_FILE_BYTES}},
                         "required": ["path", "content"], "additionalProperties": False}),
    ToolSpec(name="edit_file", description="Replace the one occurrence of `old` in a file with `new`.",
             permissions=["write"],
             parameters={"type": "object", "properties": {"path": _PATH, "old": {"type": "string", "minLength": 1},
                                                          "new": {"type": "string"}},
                         "required": ["path", "old", "new"], "additionalProperties": False}),
    ToolSpec(name="run_tests", description="Run the visible tests in a sandbox and show a summary.",
             permissions=["exec"]),
    ToolSpec(name="submit", description="Hand in the repository as it is; ends the episode.", permissions=[]),
]
TOOL_NAMES = [t.name for t in TOOLS]


# --- cases and comparison -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One call the tests make: `module.function(*args)` must return `expected`."""

    id: str
    module: str
    """Import name, e.g. `has_close_elements` or `ledger.invoices`."""
    function: str
    args: str
    """The argument tuple as a literal (see `runner.encode`)."""
    expected: str
    """The expected return value as a literal."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables set for this call only."""


@dataclass(frozen=True)
class RepoSpec:
    """Everything a repo task is made of; built deterministically from a seed."""

    files: Mapping[str, str]
    """Initial workdir: relative path -> text."""
    editable: tuple[str, ...]
    """Files the anchor takes from the agent's workdir; everything else it takes pristine."""
    protected: tuple[str, ...]
    """Paths the agent may not change (denied by permissions and by the world itself)."""
    import_paths: tuple[str, ...]
    """Folders (relative to the repo root) put on `sys.path` for the tests."""
    visible: tuple[Case, ...]
    hidden: tuple[Case, ...]
    compare: Literal["python", "strict"] = "python"
    """`python`: `==` with a float tolerance. `strict`: exact types too (Decimal by its digits)."""
    fixtures: Mapping[str, str] = field(default_factory=dict)
    """Files only the anchor sees (e.g. a config with other values for the hidden cases)."""


def same(got: Any, want: Any, *, strict: bool) -> bool:
    """Whether a returned value matches the expected one (floats within 1e-6, relative or absolute)."""
    if strict and type(got) is not type(want):
        return False
    if isinstance(want, Decimal) or isinstance(got, Decimal):
        return str(got) == str(want) if strict else bool(got == want)
    numbers = (int, float)
    if isinstance(got, numbers) and isinstance(want, numbers):
        if isinstance(got, float) or isinstance(want, float):
            if math.isnan(got) or math.isnan(want):
                return math.isnan(got) and math.isnan(want)
            return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
        return bool(got == want)
    if isinstance(want, list | tuple):
        return type(got) is type(want) and len(got) == len(want) and all(
            same(g, w, strict=strict) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(
            same(got[k], want[k], strict=strict) for k in want)
    return bool(got == want)


def show_call(case: Case, limit: int = 160) -> str:
    args = case.args[1:-1].rstrip(",") if case.args.startswith("(") else case.args
    text = f"{case.function}({args})"
    return text if len(text) <= limit else text[:limit] + "…"


# --- the anchor -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseOutcome:
    id: str
    passed: bool
    message: str
    """What went wrong, for visible cases only (hidden cases say nothing about their inputs)."""


@dataclass(frozen=True, kw_only=True)
class TestRunResult(AnchorResult):
    """The verdict of the sandboxed tests on a fresh copy of the agent's editable files.

    Unknown when the tests could not run at all (no sandbox): that is not the agent's failure. Its
    `detail` holds counts and visible failures only (no hidden input or expected value, no timings).
    """

    ran: bool
    completed: bool
    """The runner's completion record with this run's nonce came back exactly once."""
    visible: tuple[CaseOutcome, ...] = ()
    hidden_passed: int = 0
    hidden_total: int = 0
    error: str | None = None
    sandboxed: bool = True
    anchor: str = "test"
    checker: str = "sandboxed-tests"

    @property
    def visible_passed(self) -> int:
        return sum(o.passed for o in self.visible)

    @classmethod
    def of(cls, *, passed: bool, ran: bool, completed: bool, visible: tuple[CaseOutcome, ...] = (),
           hidden_passed: int = 0, hidden_total: int = 0, error: str | None = None,
           sandboxed: bool = True) -> TestRunResult:
        """The result with its outcome, reason and plain-JSON detail derived from the counts."""
        n_passed = sum(o.passed for o in visible)
        outcome = Outcome.passed if passed else Outcome.failed if ran else Outcome.unknown
        reason = ("every visible and hidden test passed" if passed
                  else f"the tests could not run: {error}" if not ran
                  else f"the runner did not complete: {error}" if not completed
                  else f"{n_passed}/{len(visible)} visible and {hidden_passed}/{hidden_total} hidden tests passed")
        failures: list[JsonValue] = [{"id": o.id, "message": o.message} for o in visible if not o.passed]
        detail: dict[str, JsonValue] = {
            "ran": ran, "completed": completed, "visible_passed": n_passed, "visible_total": len(visible),
            "hidden_passed": hidden_passed, "hidden_total": hidden_total,
            "failures": failures[:MAX_SHOWN_FAILURES], "error": error, "sandboxed": sandboxed,
        }
        return cls(outcome, reason, detail, ran=ran, completed=completed, visible=visible,
                   hidden_passed=hidden_passed, hidden_total=hidden_total, error=error, sandboxed=sandboxed)


def _copy_in(src_root: Path, rel: str, dest_root: Path) -> bool:
    try:
        data = read_file_nofollow(src_root, rel, MAX_FILE_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError, InvalidInputError):
        return False
    _write(dest_root, rel, data)
    return True


def _write(root: Path, rel: str, data: bytes) -> None:
    target = root.joinpath(*Path(rel).parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def run_cases(spec: RepoSpec, workdir: Path, cases: Sequence[Case], *, sandbox: Sandbox | None = None) -> TestRunResult:
    """Run `cases` on a fresh copy: the agent's editable files from `workdir`, everything else pristine."""
    try:
        box = sandbox or Sandbox(LIMITS)
    except SandboxUnavailableError as err:
        return TestRunResult.of(passed=False, ran=False, completed=False, error=str(err))
    nonce = secrets.token_hex(16)
    anchor_dir = Path(tempfile.mkdtemp(prefix="lle-code-anchor-"))
    try:
        for rel, text in [*spec.files.items(), *spec.fixtures.items()]:
            if rel not in spec.editable:
                _write(anchor_dir, rel, text.encode())
        for rel in spec.editable:
            _copy_in(workdir, rel, anchor_dir)
        _write(anchor_dir, RUNNER_NAME, RUNNER.read_bytes())
        request = {
            "nonce": nonce, "deadline": CHILD_DEADLINE_S, "case_seconds": CASE_SECONDS,
            "paths": [os.path.normpath(f"/work/{p}") for p in spec.import_paths],
            "cases": [{"id": c.id, "module": c.module, "function": c.function, "args": c.args, "env": dict(c.env)}
                      for c in cases],
        }
        # Everything is read-only inside: the code under test cannot rewrite the runner, tests or itself.
        top = sorted({Path(rel).parts[0] for rel in [*spec.files, *spec.fixtures, RUNNER_NAME]
                      if (anchor_dir / Path(rel).parts[0]).exists()})
        result = box.run([PYTHON, "-I", "-S", "-B", RUNNER_NAME], workdir=anchor_dir, protected=top,
                         stdin=canonical_json(request))
    finally:
        shutil.rmtree(anchor_dir, ignore_errors=True)
    return _judge(spec, cases, result.stdout, nonce, sandboxed=result.sandboxed,
                  crashed=None if result.returncode == 0 else f"runner exit status {result.returncode}"
                  + (" (wall-clock limit)" if result.timed_out else ""))


def _judge(spec: RepoSpec, cases: Sequence[Case], stdout: str, nonce: str, *, sandboxed: bool,
           crashed: str | None) -> TestRunResult:
    marks = [line for line in stdout.splitlines() if line.startswith(DONE_MARK)]
    valid = [line for line in marks if line.startswith(f"{DONE_MARK} {nonce} ")]
    hidden_ids = {c.id for c in spec.hidden}
    n_hidden = sum(c.id in hidden_ids for c in cases)
    if len(marks) != 1 or len(valid) != 1:
        why = "no completion record from the runner" if not marks else "a forged or repeated completion record"
        not_run = tuple(CaseOutcome(c.id, False, f"{show_call(c)}: not run ({why})")
                        for c in cases if c.id not in hidden_ids)
        return TestRunResult.of(passed=False, ran=True, completed=False, visible=not_run, hidden_total=n_hidden,
                                 error=crashed or why, sandboxed=sandboxed)
    try:
        summary = decode_summary(valid[0].split(" ", 2)[2])
    except (ValueError, RecursionError) as err:
        return TestRunResult.of(passed=False, ran=True, completed=False, hidden_total=n_hidden,
                                error=f"unreadable runner record: {err}", sandboxed=sandboxed)
    results, duplicates = summary["results"], set(summary["duplicates"])
    outcomes: list[CaseOutcome] = []
    hidden_passed = 0
    for case in cases:
        passed, message = _check(case, results.get(case.id), case.id in duplicates, strict=spec.compare == "strict")
        if case.id in hidden_ids:
            hidden_passed += passed
        else:
            outcomes.append(CaseOutcome(case.id, passed, message))
    ok = all(o.passed for o in outcomes) and hidden_passed == n_hidden and bool(cases)
    return TestRunResult.of(passed=ok, ran=True, completed=True, visible=tuple(outcomes),
                            hidden_passed=hidden_passed, hidden_total=n_hidden, sandboxed=sandboxed)


def decode_summary(text: str) -> dict[str, Any]:
    import json

    summary = json.loads(text)
    if not isinstance(summary, dict) or not isinstance(summary.get("results"), dict) \
            or not isinstance(summary.get("duplicates"), list):
        raise ValueError("missing results")
    return summary


def _check(case: Case, record: Any, duplicated: bool, *, strict: bool) -> tuple[bool, str]:
    call = show_call(case)
    if duplicated:
        return False, f"{call}: reported twice (output tampered with)"
    if not isinstance(record, dict):
        return False, f"{call}: no result (the process ended or timed out before this case)"
    if not record.get("ok"):
        # Addresses in reprs differ per run; observations must not (replay and resume compare them).
        error = re.sub(r"0x[0-9a-fA-F]{4,}", "0x…", str(record.get("error")))
        return False, f"{call} raised {error[:300]}"
    text = str(record.get("value"))
    if len(text) > MAX_VALUE_CHARS:
        return False, f"{call}: result longer than {MAX_VALUE_CHARS} characters"
    try:
        got = decode(text)
    except Exception as err:  # what came back is untrusted text: anything unreadable is a failure
        return False, f"{call}: unreadable result ({type(err).__name__})"
    if same(got, decode(case.expected), strict=strict):
        return True, ""
    shown = str(record.get("value"))
    return False, f"{call} returned {shown[:200]}, expected {case.expected[:200]}"


def verify(spec: RepoSpec, workdir: Path, *, sandbox: Sandbox | None = None) -> TestRunResult:
    """The anchor: visible plus hidden cases on a fresh copy of the editable files (see the module doc)."""
    return run_cases(spec, workdir, [*spec.visible, *spec.hidden], sandbox=sandbox)


# --- the world ----------------------------------------------------------------------------------------


def _rel(raw: str) -> str:
    """A canonical relative path, or `InvalidInputError` (absolute, `..`, NUL, empty)."""
    if "\x00" in raw:
        raise InvalidInputError("the path contains a NUL byte")
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if raw.startswith("/") or not parts or ".." in parts:
        raise InvalidInputError(f"{raw!r} is not a path inside the repository; write it like `src/module.py`")
    return "/".join(parts)


def _under(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)


class RepoWorld(BaseWorld):
    """A repo in a temp workdir with the file tools, `run_tests` and `submit` (the anchor)."""

    version = "1"

    def __init__(self, *, seed: int, sandbox: Sandbox | None = None) -> None:
        self.tools = list(TOOLS)
        self.default_seed = seed
        self.sandbox = sandbox
        self.workdir: Path | None = None
        self.spec: RepoSpec | None = None
        self.done = False
        self.test_runs = 0

    @abstractmethod
    def build(self, seed: int) -> tuple[RepoSpec, dict[str, Any]]:
        """The repo for `seed` and the `info` returned by reset (no gold in it)."""

    # --- Gymnasium shape --------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.close()
        self.spec, info = self.build(self.default_seed if seed is None else seed)
        self.workdir = Path(tempfile.mkdtemp(prefix="lle-code-"))
        for rel, text in self.spec.files.items():
            _write(self.workdir, rel, text.encode())
        self.done, self.test_runs = False, 0
        listing = "\n".join(f"  {rel}" for rel in sorted(self.spec.files))
        return (f"A repository with these files:\n{listing}\nTests under tests/ are read-only; only "
                f"{', '.join(self.spec.editable)} is graded. Use run_tests to run the visible tests and "
                "submit when they pass.", info)

    def step(self, action: ActionRequest) -> WorldStep:
        if self.spec is None or self.workdir is None or self.done:
            raise WorldError("code world: step() before reset() or after the episode ended; call reset()")
        handler = getattr(self, f"_do_{action.tool}", None)
        if handler is None or action.tool not in TOOL_NAMES:
            raise WorldError(f"code world has no tool {action.tool!r}; use one of {', '.join(TOOL_NAMES)}")
        try:
            result: WorldStep = handler(**action.args)
        except InvalidInputError as err:
            return self._obs(f"error: {err}")
        return result

    def state(self) -> dict[str, JsonValue]:
        if self.spec is None:
            return {}
        return {"done": self.done, "test_runs": self.test_runs}

    def close(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    # --- tools ---------------------------------------------------------------------------------------

    def _do_list_files(self) -> WorldStep:
        return self._obs("\n".join(self._files()) or "(no files)")

    def _do_read_file(self, path: str) -> WorldStep:
        assert self.workdir is not None
        rel = _rel(path)
        try:
            data = read_file_nofollow(self.workdir, rel, MAX_FILE_BYTES)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return self._obs(f"error: no file {rel}; list_files shows what exists")
        return self._obs(data.decode(errors="replace"))

    def _do_write_file(self, path: str, content: str) -> WorldStep:
        rel = self._writable(path)
        self._store(rel, content)
        return self._obs(f"wrote {rel} ({len(content.encode())} bytes)")

    def _do_edit_file(self, path: str, old: str, new: str) -> WorldStep:
        assert self.workdir is not None
        rel = self._writable(path)
        try:
            text = read_file_nofollow(self.workdir, rel, MAX_FILE_BYTES).decode(errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return self._obs(f"error: no file {rel}; create it with write_file")
        count = text.count(old)
        if count != 1:
            return self._obs(f"error: `old` occurs {count} times in {rel}; it must occur exactly once "
                             "(include more surrounding lines)")
        self._store(rel, text.replace(old, new, 1))
        return self._obs(f"edited {rel}")

    def _do_run_tests(self) -> WorldStep:
        assert self.spec is not None and self.workdir is not None
        self.test_runs += 1
        result = run_cases(self.spec, self.workdir, self.spec.visible, sandbox=self.sandbox)
        return WorldStep(self._summary(result), 0.0, False, False,
                         {"passed": result.visible_passed, "total": len(result.visible)})

    def verify(self) -> TestRunResult:
        """The anchor on the workdir as it is now (what `submit` runs)."""
        if self.spec is None or self.workdir is None:
            raise WorldError("code world: verify() before reset(); call reset() first")
        return verify(self.spec, self.workdir, sandbox=self.sandbox)

    def _do_submit(self) -> WorldStep:
        self.done = True
        result = self.verify()
        text = (f"Submitted. Visible tests {result.visible_passed}/{len(result.visible)}, hidden tests "
                f"{result.hidden_passed}/{result.hidden_total}: {'success' if result.passed else 'not solved'}.")
        return result.world_step(text)

    # --- helpers ----------------------------------------------------------------------------------

    def _obs(self, text: str) -> WorldStep:
        return WorldStep(text, 0.0, False, False, {})

    def _writable(self, path: str) -> str:
        assert self.spec is not None
        rel = _rel(path)
        if _under(rel, self.spec.protected):
            # The grounder denies this first; the world refuses too, for callers that skip grounding.
            shown = ", ".join(self.spec.protected)
            raise InvalidInputError(f"{rel} is protected and cannot change (protected: {shown})")
        return rel

    def _store(self, rel: str, content: str) -> None:
        assert self.workdir is not None
        target = self.workdir
        for part in Path(rel).parts[:-1]:
            target = target / part
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                raise InvalidInputError(f"cannot write {rel}: {part} is not a folder")
            target.mkdir(exist_ok=True)
        final = target / Path(rel).name
        if final.is_symlink() or (final.exists() and not final.is_file()):
            raise InvalidInputError(f"cannot write {rel}: it is not a regular file")
        fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)

    def _files(self) -> list[str]:
        assert self.workdir is not None
        found = []
        for dirpath, dirnames, filenames in os.walk(self.workdir, followlinks=False):
            dirnames.sort()
            for name in filenames:
                full = Path(dirpath) / name
                if stat.S_ISREG(full.lstat().st_mode):
                    found.append(full.relative_to(self.workdir).as_posix())
        return sorted(found)

    def _summary(self, result: TestRunResult) -> str:
        if not result.ran:
            return f"error: the tests could not run: {result.error}"
        total, passed = len(result.visible), result.visible_passed
        lines = [f"run_tests: {passed} passed, {total - passed} failed (of {total})"]
        lines += [f"FAIL {o.id}: {o.message}" for o in result.visible if not o.passed][:MAX_SHOWN_FAILURES]
        if total - passed > MAX_SHOWN_FAILURES:
            lines.append(f"… and {total - passed - MAX_SHOWN_FAILURES} more failures")
        if result.error and not result.completed:
            lines.append(f"runner: {result.error}")
        return "\n".join(lines)
