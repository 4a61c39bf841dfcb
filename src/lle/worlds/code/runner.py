"""The test runner the code worlds run inside the sandbox (stdlib only: it runs under /usr/bin/python3).

Two processes, so that the code under test never holds what would let it fake a pass:

- the *parent* reads the whole request from stdin (cases plus a random nonce) before anything
  else runs, makes itself non-dumpable (so a same-uid process cannot read its memory or fds
  through /proc), then starts the *child* and passes it the cases without the nonce;
- the *child* imports the module under test, calls each case and writes one JSON line per case
  to a private copy of its stdout (the module's own prints go to stderr);
- the parent collects the lines until the child ends or the deadline passes and prints exactly
  one completion record, `LLE-RUNNER-DONE <nonce> <json>`.

The runner never decides pass or fail: it only reports what each call returned, encoded by a
strict encoder that accepts exact builtin types (no subclasses, so no `__eq__` tricks). The host
compares against expected values that never enter the sandbox. A module that exits early, kills
its parent, or prints a fake record produces no valid completion record, or missing results.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import time
from decimal import Decimal
from typing import Any

DONE_MARK = "LLE-RUNNER-DONE"
MAX_VALUE_CHARS = 4000
_type, _repr, _sorted = type, repr, sorted  # bound before any module code runs


class Unsupported(Exception):
    """A value the strict encoder refuses (not a plain literal of an exact builtin type)."""


def encode(value: Any, depth: int = 0) -> str:
    """A Python-literal spelling of `value`, refusing subclasses and anything not plain data."""
    if depth > 20:
        raise Unsupported("value nested deeper than 20 levels")
    kind = _type(value)
    if kind is bool or kind is int or kind is str or value is None:
        return _repr(value)
    if kind is float:
        return _repr(value) if math.isfinite(value) else f"float({_repr(_repr(value))})"
    if kind is Decimal:
        return f"Decimal({_repr(str(value))})"
    if kind is list:
        return "[" + ", ".join(encode(v, depth + 1) for v in value) + "]"
    if kind is tuple:
        items = [encode(v, depth + 1) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if kind is dict:
        return "{" + ", ".join(f"{encode(k, depth + 1)}: {encode(v, depth + 1)}" for k, v in value.items()) + "}"
    if kind is set or kind is frozenset:
        return "set([" + ", ".join(_sorted(encode(v, depth + 1) for v in value)) + "])"
    raise Unsupported(f"returned a {kind.__name__}; return plain data (int, float, str, bool, None, list, "
                      "tuple, dict, set, Decimal)")


def decode(text: str) -> Any:
    """The inverse of `encode` for trusted input (the case arguments the host sent)."""
    import ast

    def value(node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.List):
            return [value(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(value(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return {value(k): value(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
        if isinstance(node, ast.Set):
            return {value(e) for e in node.elts}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            args = [value(a) for a in node.args]
            if node.func.id == "Decimal":
                return Decimal(*args)
            if node.func.id == "float":
                return float(*args)
            if node.func.id == "set":
                return set(*args)
        raise ValueError(f"not a plain literal: {ast.dump(node)[:80]}")

    return value(ast.parse(text, mode="eval").body)


class _Timeout(BaseException):
    """Raised by the per-case alarm; a BaseException so `except Exception` in the module cannot eat it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def child() -> None:
    request = json.loads(sys.stdin.read())
    sys.stdin.close()
    out = os.dup(1)
    os.dup2(2, 1)  # whatever the module prints lands on stderr, never on the results channel
    sys.stdout = sys.stderr
    for path in reversed(request["paths"]):
        sys.path.insert(0, path)
    signal.signal(signal.SIGALRM, _on_alarm)
    per_case = float(request.get("case_seconds", 2.0))
    base_env = dict(os.environ)
    modules: dict[str, Any] = {}
    import importlib

    timed_out: str | None = None
    for case in request["cases"]:
        record: dict[str, Any] = {"id": case["id"]}
        if timed_out is not None:
            # One slow case would make every later one race the parent's deadline: stop, the same way each run.
            record.update(ok=False, error=f"NotRun: case {timed_out} timed out before it")
            os.write(out, (json.dumps(record) + "\n").encode())
            continue
        try:
            os.environ.clear()
            os.environ.update(base_env)
            os.environ.update(case.get("env", {}))
            signal.setitimer(signal.ITIMER_REAL, per_case)
            try:
                name = case["module"]
                if name not in modules:
                    modules[name] = importlib.import_module(name)
                function = getattr(modules[name], case["function"])
                result = function(*decode(case["args"]))
                text = encode(result)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if len(text) > MAX_VALUE_CHARS:
                raise Unsupported(f"result longer than {MAX_VALUE_CHARS} characters")
            record.update(ok=True, value=text)
        except _Timeout:
            timed_out = case["id"]
            record.update(ok=False, error=f"Timeout: took longer than {per_case:g} s")
        except BaseException as err:  # SystemExit and KeyboardInterrupt included: a case that exits fails
            record.update(ok=False, error=f"{_type(err).__name__}: {str(err)[:300]}")
        os.write(out, (json.dumps(record) + "\n").encode())


def _no_dump() -> None:
    # PR_SET_DUMPABLE=0: /proc/<pid>/mem, fd/ and environ of this process become unreadable to the child.
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)


def parent(script: str) -> None:
    request = json.loads(sys.stdin.read())
    sys.stdin.close()
    nonce = request.pop("nonce")
    _no_dump()
    deadline = time.monotonic() + float(request.get("deadline", 5.0))
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", script, "--child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(json.dumps(request).encode())
        proc.stdin.close()
    buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    sel = selectors.DefaultSelector()
    for fd in buffers:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    timed_out = False
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=left):
            chunk = os.read(int(key.fd), 1 << 16)
            if not chunk:
                sel.unregister(key.fd)
            elif len(buffers[int(key.fd)]) < 4 << 20:
                buffers[int(key.fd)] += chunk
    proc.kill()
    returncode = proc.wait()
    results: dict[str, Any] = {}
    duplicates: list[str] = []
    wanted = {c["id"] for c in request["cases"]}
    for line in bytes(buffers[proc.stdout.fileno()]).decode(errors="replace").splitlines():
        try:
            record = json.loads(line)
            case_id = record["id"]
        except Exception:  # the child is untrusted: anything unreadable (even nested too deep) is dropped
            continue
        if not isinstance(case_id, str) or case_id not in wanted:
            continue
        if case_id in results:
            duplicates.append(case_id)
            continue
        # Only plain, bounded fields go on: what the child wrote is never passed through as it is.
        clean: dict[str, Any] = {"id": case_id, "ok": record.get("ok") is True}
        for field, limit in (("value", MAX_VALUE_CHARS + 1), ("error", 400)):
            if isinstance(record.get(field), str):
                clean[field] = record[field][:limit]
        results[case_id] = clean
    stderr = bytes(buffers[proc.stderr.fileno()]).decode(errors="replace")
    summary = {"results": results, "duplicates": duplicates, "returncode": returncode, "timed_out": timed_out,
               "stderr_tail": stderr[-1500:]}
    sys.stdout.write(f"\n{DONE_MARK} {nonce} {json.dumps(summary)}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        parent(os.path.abspath(sys.argv[0]))
