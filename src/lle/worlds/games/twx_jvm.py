"""One TextWorldExpress JVM per process, shared by every open world and shut down with the last one.

Starting the JVM and warming the simulator costs about a second; a step costs about a millisecond.
Each world gets its own `PythonInterface` (its own game) inside the shared JVM, so worlds never see
each other's state (the games are deterministic under interleaved and concurrent use; tests check
both). The JVM is reference-counted: `acquire()` starts it if needed, `release()` of the last
holder shuts the gateway down and reaps the `java` process, so nothing outlives the last world.
A forked child never reuses its parent's JVM: it starts its own.

This is a thin client over the simulator's Java interface, as TextWorldExpress's own Python class
(`TextWorldExpressEnv`) is, but without starting one JVM per game.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
from typing import Any

from lle.errors import WorldError

_lock = threading.Lock()
_shared: _Jvm | None = None


class _Jvm:
    def __init__(self) -> None:
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
        from textworld_express.constants import BASEPATH, JAR_PATH

        port, proc = launch_gateway(classpath=JAR_PATH, die_on_exit=True, cwd=BASEPATH, return_proc=True)
        self.process: subprocess.Popen[bytes] = proc
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(auto_field=True, port=port),
                                   java_process=proc)
        self.pid = os.getpid()
        self.holders = 0

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):  # already gone is what shutting down wants anyway
            self.gateway.shutdown()
        if self.process.poll() is None and self.process.stdin is not None:
            # die_on_exit: the JVM exits when its stdin gets a line or closes.
            try:
                self.process.stdin.write(b"\n")
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def acquire() -> _Jvm:
    global _shared
    with _lock:
        if _shared is None or _shared.pid != os.getpid() or _shared.process.poll() is not None:
            try:
                _shared = _Jvm()
            except Exception as err:
                raise WorldError(f"cannot start the TextWorldExpress JVM ({type(err).__name__}: {err}); "
                                 "install Java 11+ (`java -version`) and the textworld-express package") from err
        _shared.holders += 1
        return _shared


def release(jvm: _Jvm) -> None:
    global _shared
    with _lock:
        jvm.holders -= 1
        if jvm.holders > 0 or jvm.pid != os.getpid():
            return
        if _shared is jvm:
            _shared = None
        jvm.shutdown()


def running_pid() -> int | None:
    """Pid of this process's JVM, or None when none runs (for tests and diagnostics)."""
    with _lock:
        if _shared is None or _shared.pid != os.getpid() or _shared.process.poll() is not None:
            return None
        return int(_shared.process.pid)


class Simulator:
    """One game inside the shared JVM: load, reset, step, the gold path. Closed once; idempotent."""

    def __init__(self) -> None:
        self.jvm: _Jvm | None = acquire()
        try:
            self.server: Any = self.jvm.gateway.jvm.textworldexpress.runtime.PythonInterface()
        except Exception:
            release(self.jvm)
            self.jvm = None
            raise
        self.loaded: tuple[str, str] | None = None

    def load(self, game: str, params: str) -> None:
        if self.loaded != (game, params):
            message = self.server.load(game, params)
            if message:
                raise WorldError(f"TextWorldExpress refused {game} with {params!r}: {message}")
            self.loaded = (game, params)

    def reset(self, seed: int, fold: str) -> dict[str, Any]:
        infos = self._parse(self.server.generateNewGameJSON(seed, fold, True))
        infos["numMoves"] = 0
        return infos

    def step(self, command: str, moves: int) -> dict[str, Any]:
        infos = self._parse(self.server.stepJSON(command))
        infos["numMoves"] = moves
        return infos

    def gold(self) -> list[str]:
        return [str(a) for a in self.server.getGoldActionSequence()]

    def seeds(self) -> dict[str, list[int]]:
        """The simulator's own seed list per fold (to check lle's fold layout against)."""
        return {"train": [int(s) for s in self.server.getSeedsTrain()],
                "dev": [int(s) for s in self.server.getSeedsDev()],
                "test": [int(s) for s in self.server.getSeedsTest()]}

    def close(self) -> None:
        jvm, self.jvm = self.jvm, None
        if jvm is None:
            return
        with contextlib.suppress(Exception):  # the JVM may be gone already
            jvm.gateway.detach(self.server)
        release(jvm)

    def _parse(self, response: str) -> dict[str, Any]:
        infos: dict[str, Any] = json.loads(response)
        infos["taskDescription"] = str(self.server.getTaskDescription())
        return infos
