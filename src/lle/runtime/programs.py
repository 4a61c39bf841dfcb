"""Program skills: a short Python program over the world's tools, run by re-execution in the sandbox.

A program is `def skill(goal, call)`, where `call(tool, **args)` returns the observation of that tool
call. It never runs beside the world: whenever the harness needs its next call, the program runs again
from the start in `lle.sandbox` (bubblewrap, no network, small rlimits, a few seconds) with the goal and
the observations so far. A small driver answers its first calls with those observations, in order; at
the first call past them it prints that call as one JSON line and stops the program; when `skill()`
returns it prints `done`. So what a program does next is a function of (goal, observations) alone:
nothing lives between runs, a killed episode resumes by running it again, and the host reads nothing
from it but one JSON line. Its calls are then grounded like any other request (unknown tool, tool not
allowed here, bad args: denied and recorded), so the sandbox guards the host and the grounder the world.
"""

from __future__ import annotations

import functools
import json
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import JsonValue

from lle.core import ActionRequest, Feedback, Step, canonical_json
from lle.errors import SandboxUnavailableError
from lle.sandbox import Sandbox, SandboxLimits

MAX_PROGRAM_CALLS = 40
"""Most tool calls one run of a program may make; one more is a failure."""
PYTHON = "/usr/bin/python3"
"""The sandbox's interpreter (only /usr is visible inside; the project's virtualenv is not)."""
LIMITS = SandboxLimits(cpu_seconds=2, memory_mb=256, file_size_mb=1, max_processes=8, wall_seconds=10.0,
                       max_output_bytes=1 << 22, workdir_mb=1, workdir_files=16)
"""Per run: the program re-runs once per call, so each run must be quick; it writes nothing that is kept. CPU time
bounds what it computes; the wall limit only stops one that waits, and is far above a run's ~70 ms, so a loaded
machine does not decide whether a program passed."""

# The driver: stdlib only, run with `python3 -I -S -B -c`. What the program prints goes nowhere (only the
# driver's line reaches stdout); a call past the recorded observations, or a fatal misuse of `call`, raises
# `_Next`, a BaseException, so a program's `except Exception` does not swallow it.
DRIVER = r'''
import io, json, os, sys, traceback
req = json.loads(sys.stdin.read())
out, seen, made, fatal = sys.stdout, req["observations"], [], []
sys.stdout, sys.stdin = io.StringIO(), io.StringIO()

class _Next(BaseException):
    pass

def call(tool, **args):
    if fatal or len(made) > len(seen):
        raise _Next
    if not isinstance(tool, str):
        fatal.append("call(tool, **args): tool is a %s, not a str" % type(tool).__name__)
        raise _Next
    try:
        json.dumps(args, allow_nan=False)
    except (TypeError, ValueError) as err:
        fatal.append("call %d (%s): its args are not JSON: %s" % (len(made) + 1, tool, err))
        raise _Next
    if len(made) >= req["max_calls"]:
        fatal.append("the program made more than %d calls" % req["max_calls"])
        raise _Next
    made.append({"tool": tool, "args": args})
    if len(made) > len(seen):
        raise _Next
    return seen[len(made) - 1]

result = {}
try:
    space = {"__name__": "skill_program"}
    exec(compile(req["program"], "<program>", "exec"), space)
    if not callable(space.get("skill")):
        result["error"] = "the program defines no function skill(goal, call)"
    else:
        space["skill"](req["goal"], call)
        result["done"] = True
except _Next:
    pass
except BaseException as err:
    where = [f.lineno for f in traceback.extract_tb(err.__traceback__) if f.filename == "<program>"]
    if isinstance(err, SyntaxError) and err.filename == "<program>":
        where = [err.lineno]
    last = traceback.format_exception_only(type(err), err)[-1].strip()
    result["error"] = last + (" (program line %s)" % where[-1] if where else "")
if fatal:
    result = {"error": fatal[0]}
result["calls"] = made
out.write(json.dumps(result, allow_nan=False) + "\n")
out.flush()
os._exit(0)
'''


@functools.cache
def _sandbox(limits: SandboxLimits) -> Sandbox:
    return Sandbox(limits)  # raises SandboxUnavailableError without bubblewrap (not cached: it raised)


class ProgramRunner:
    """Gives a program's next tool call by re-executing it in the sandbox over the observations so far.

    Never raises for anything the program does: a failure is returned as the reason, in words.
    """

    def __init__(self, program: str, *, sandbox: Sandbox | None = None, limits: SandboxLimits = LIMITS,
                 max_calls: int = MAX_PROGRAM_CALLS) -> None:
        self.program, self.sandbox, self.limits, self.max_calls = program, sandbox, limits, max_calls

    def next_call(self, goal: str, observations: Sequence[str],
                  made: Sequence[ActionRequest] | None = None) -> ActionRequest | str | None:
        """The call after `observations` (the results of the program's calls so far, in order); None when the
        program returned; else why it failed. `made`: the calls those observations answered, which the
        program must make again (a program that does not is not deterministic, and is stopped)."""
        try:
            box = self.sandbox or _sandbox(self.limits)
        except SandboxUnavailableError as err:
            return f"the program cannot run: {err}"
        request = canonical_json({"program": self.program, "goal": goal, "observations": list(observations),
                                  "max_calls": self.max_calls})
        with tempfile.TemporaryDirectory(prefix="lle-program-") as scratch:
            result = box.run([PYTHON, "-I", "-S", "-B", "-c", DRIVER], workdir=Path(scratch), stdin=request)
        if result.timed_out or result.returncode in (128 + signal.SIGXCPU, 128 + signal.SIGKILL):
            return (f"the program ran past its time limit ({box.limits.cpu_seconds} s of CPU, "
                    f"{box.limits.wall_seconds:g} s in all): a loop that never calls or ends?")
        lines = result.stdout.splitlines()
        if len(lines) != 1 or result.returncode != 0:
            said = (result.stderr.strip().splitlines() or [""])[-1][:200]
            how = f"exit status {result.returncode}" + (f": {said}" if said else "")
            return (f"the program's output is not one result line ({how}); it must talk to the world only "
                    "through call()") if result.returncode == 0 else f"the program was stopped ({how})"
        return self._read(lines[0], len(observations), made)

    def _read(self, line: str, answered: int, made: Sequence[ActionRequest] | None) -> ActionRequest | str | None:
        try:
            out = json.loads(line)
            calls = [(str(c["tool"]), dict(c["args"])) for c in out["calls"]]
        except (ValueError, TypeError, KeyError, AttributeError):
            return f"the program's output is not a result line: {line[:120]!r}"
        if isinstance(out.get("error"), str):
            return f"the program failed: {out['error'][:300]}"
        for n, (before, again) in enumerate(zip(made or [], calls, strict=False)):
            if (before.tool, canonical_json(before.args)) != (again[0], canonical_json(again[1])):
                return (f"the program is not deterministic: its call {n + 1} was {before.tool} "
                        f"{canonical_json(before.args)[:80]} and is now {again[0]} {canonical_json(again[1])[:80]} "
                        "on the same observations")
        if len(calls) == answered + 1:
            tool, args = calls[-1]
            return ActionRequest(tool=tool, args=args)
        if out.get("done") is True and len(calls) == answered:
            return None
        if len(calls) < answered:
            return f"the program is not deterministic: it now ends after {len(calls)} of its {answered} calls"
        return f"the program's output does not follow the protocol ({len(calls)} calls for {answered} observations)"


# --- the harness's side: notes and resume ------------------------------------------------------------------

SKILL = "skill"
"""`Feedback.kind` on each step a skill expanded (`lle.carriers.skill_mining.SKILL_FEEDBACK`)."""
FIRED = "skill_fired"
"""`Feedback.kind` on the first step of the program skill the runtime ran before the policy acted."""


def note(skill_id: str, request: ActionRequest, call: int, *, stopped: bool) -> Feedback:
    """The runtime's note on the `call`-th step (from 1) of a program skill run for `request`; `of` is null
    (how many calls a program makes is known only when it ends), `stopped` when the program ends there."""
    return Feedback(source="runtime", kind=SKILL, content={
        "skill": skill_id, "tool": request.tool, "args": request.args, "thought": request.thought, "call": call,
        "of": None, "stopped": stopped})


def running(history: Sequence[Step]) -> tuple[int, ActionRequest, str] | None:
    """(index of its first step, the request that started it, skill id) of the program skill the last committed
    step belongs to, when that program did not stop there; else None. A resumed episode runs it on."""
    if not history:
        return None
    last = _note(history[-1])
    if last is None or last.get("of") is not None or last.get("stopped") is not False:
        return None
    call = last.get("call")
    start = len(history) - call if isinstance(call, int) else -1
    first = _note(history[start]) if 0 <= start < len(history) else None
    if first is None or first.get("call") != 1 or first.get("skill") != last.get("skill"):
        return None
    args = first.get("args")
    request = ActionRequest(tool=str(first.get("tool")), args=args if isinstance(args, dict) else {},
                            thought=str(first.get("thought") or ""))
    return start, request, str(last.get("skill"))


def _note(step: Step) -> dict[str, JsonValue] | None:
    return next((f.content for f in step.feedback if f.source == "runtime" and f.kind == SKILL
                 and isinstance(f.content, dict)), None)
