"""G: an `ActionRequest` becomes what the runtime really executed and what really changed.

    request -> known tool? args valid? (else malformed: an error step, the world is not touched)
            -> allowed in this small world? permissions? (else denied with the reason, world not touched)
            -> normalized (paths made canonical) -> world.step -> output truncated to the limit
            -> Effect with real changes: files (sha256 before/after) and the world's own state diff

Requested ≠ executed ≠ effect (DESIGN §1): all three are kept, and a denied action never reaches
the world. Changes are measured, never taken from the world's word: the workdir is hashed and
the world's `state()` diffed around every step.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import posixpath
import re
import stat
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import jsonschema
from pydantic import JsonValue

from lle.actions import action_schema
from lle.core import (
    ActionRequest,
    ActionStatus,
    Change,
    Effect,
    ExecutedAction,
    Feedback,
    SmallWorld,
    ToolSpec,
    canonical_json,
)
from lle.errors import WorldError
from lle.worlds.base import ToolWorld

PATH_FORMAT = "path"
"""A tool argument whose schema says `"format": "path"` is a workdir path: normalized and permission-checked."""
TRUNCATION_MARK = "\n…[output truncated: {n} more bytes]"

FileSnapshot = dict[str, str]
StatCache = dict[str, tuple[tuple[int, int, int, int], str]]


# --- files: snapshot and diff --------------------------------------------------------------------------


def snapshot_workdir(root: Path, cache: StatCache | None = None) -> FileSnapshot:
    """relative posix path -> `sha256:…` for every file under `root`; symlinks are never followed.

    A symlink is recorded as `symlink:<target>`, anything else that is not a file or folder as
    `special:<mode>`. `cache` (path -> (stat key, digest)) skips rehashing files whose inode, size,
    mtime and ctime are unchanged; ctime cannot be set from user space, so a rewrite always shows.
    """
    found: FileSnapshot = {}
    seen: set[str] = set()
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # vanished or unreadable mid-walk: what is not there cannot be hashed
        for entry in entries:
            rel = prefix + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                pending.append((Path(entry.path), rel + "/"))
            elif stat.S_ISLNK(st.st_mode):
                found[rel] = "symlink:" + os.readlink(entry.path)
            elif stat.S_ISREG(st.st_mode):
                key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                hit = cache.get(rel) if cache is not None else None
                if hit is not None and hit[0] == key:
                    found[rel] = hit[1]
                else:
                    digest = _sha256_file(entry.path)
                    if digest is None:
                        continue
                    found[rel] = digest
                    if cache is not None:
                        cache[rel] = (key, digest)
                seen.add(rel)
            else:
                found[rel] = f"special:{stat.S_IFMT(st.st_mode):o}"
    if cache is not None:
        for gone in set(cache) - seen:
            del cache[gone]
    return found


def _sha256_file(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        # O_NOFOLLOW: a file swapped for a symlink between stat and open is not followed either.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def diff_files(before: FileSnapshot, after: FileSnapshot) -> list[Change]:
    """One `Change(kind="file")` per created, modified or removed path, sorted by path."""
    return [Change(kind="file", target=p, before=before.get(p), after=after.get(p))
            for p in sorted(before.keys() | after.keys()) if before.get(p) != after.get(p)]


def diff_state(before: dict[str, JsonValue], after: dict[str, JsonValue]) -> list[Change]:
    """One `Change(kind="state")` per key whose value differs (or changes type), sorted by key."""
    changes = []
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        if a != b or type(a) is not type(b):  # False -> 0 is a change, though False == 0
            changes.append(Change(kind="state", target=key, before=a, after=b))
    return changes


# --- paths ------------------------------------------------------------------------------------------------


def matches(path: str, patterns: list[str]) -> bool:
    """`path` is one of `patterns`, lies under one (a folder prefix), or matches a glob among them."""
    for pattern in patterns:
        p = pattern.strip("/") or "."
        if p == "." or path == p or path.startswith(p + "/"):
            return True
        if any(c in p for c in "*?[") and fnmatch.fnmatchcase(path, p):
            return True
    return False


TEST_FILE = re.compile(r"(.*/)?(test_[^/]*|[^/]*_test|conftest)\.py")


def protected_scope(patterns: list[str]) -> list[str]:
    """`patterns`, with each protected test file below the top widened to its whole folder: else a
    `conftest.py` added beside it could change what the protected tests do (the sandbox does the same)."""
    return [*patterns, *(p.rsplit("/", 1)[0] for p in (q.strip("/") for q in patterns)
                         if "/" in p and TEST_FILE.fullmatch(p))]


def normalize_path(raw: str, workdir: Path | None) -> tuple[str, str | None]:
    """(canonical relative path, denial reason or None)."""
    if "\x00" in raw:
        return raw, "path contains a NUL byte"
    candidate = raw
    if posixpath.isabs(raw):
        if workdir is None:
            return raw, "absolute paths are not allowed here; use a path relative to the workdir"
        root = str(workdir.resolve())
        if raw != root and not raw.startswith(root + "/"):
            return raw, f"{raw} is outside the workdir"
        candidate = posixpath.relpath(raw, root)
    norm = posixpath.normpath(candidate)
    if norm == ".." or norm.startswith("../"):
        return norm, f"{raw} escapes the workdir"
    if workdir is not None:
        root = os.path.realpath(workdir)
        real = os.path.realpath(os.path.join(root, norm))
        if real != root and not real.startswith(root + os.sep):
            return norm, f"{raw} resolves outside the workdir through a symlink"
    return norm, None


# --- grounding -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grounded:
    """One grounded action: what ran, what changed, the world's signals."""

    executed: ExecutedAction
    effect: Effect
    feedback: tuple[Feedback, ...] = ()
    failure: Literal["malformed", "world"] | None = None
    """Why the episode cannot go on: a malformed request, or the world raised."""
    terminated: bool = False
    truncated: bool = False


class SkillTool(Protocol):
    """A skill offered as one more tool, which the harness expands into tool calls (`lle.carriers.skills`):
    a macro's fixed calls, or the calls a program makes one by one."""

    @property
    def item_id(self) -> str: ...

    def spec_for(self, goal: str | None) -> ToolSpec:
        """The tool as offered for `goal` (None: any goal)."""
        ...

    @property
    def size(self) -> int:
        """Tool calls in the macro."""
        ...

    @property
    def program(self) -> str | None:
        """A program skill's source, which the harness runs instead of a macro (`lle.runtime.programs`)."""
        ...

    def call(self, n: int, args: Mapping[str, JsonValue], *, goal: str,
             observations: Sequence[str]) -> ActionRequest | str:
        """The `n`-th call (from 0), its slots filled from `args`, the goal or the observations so far
        (0: before the macro, k: after call k); or why it cannot be filled."""
        ...


class Grounder:
    """Grounds requests for one small world in one (already reset) world instance.

    `skills` are offered after the world's tools; a call to one (checked by `check_skill_call`) is
    expanded by the harness into tool calls that are each grounded like any other request.
    """

    def __init__(self, small_world: SmallWorld, world: ToolWorld, *, record_timings: bool = True,
                 skills: Sequence[SkillTool] = ()) -> None:
        self.small_world = small_world
        self.world = world
        self.record_timings = record_timings
        self.world_tools = {t.name: t for t in world.tools}
        missing = [n for n in small_world.tools if n not in self.world_tools]
        if not small_world.tools or missing:
            what = f"names tools the world lacks: {missing}" if missing else "allows no tools"
            raise WorldError(f"small world {small_world.id} {what}; the world offers {sorted(self.world_tools)}, "
                             "list the allowed ones in SmallWorld.tools")
        skill_specs = [s.spec_for(small_world.goal) for s in skills]
        self.skills = {spec.name: s for spec, s in zip(skill_specs, skills, strict=True)}
        clash = sorted(set(self.skills) & set(self.world_tools))
        if clash:
            raise WorldError(f"skills {clash} have the names of world tools; skill tools are named skill_<name>")
        self.tools: list[ToolSpec] = [self.world_tools[n] for n in small_world.tools] + skill_specs
        """The tools the policy sees (the small world's, in its order, then the skills offered)."""
        self.schema = action_schema(self.tools)
        # Compiled once: jsonschema.validate() would re-check the schema itself on every call.
        self.validators = {t.name: jsonschema.Draft202012Validator({"type": "object", **t.parameters})
                           for t in [*self.world_tools.values(), *skill_specs]}
        self.path_args = {name: [k for k, v in _properties(t).items() if v.get("format") == PATH_FORMAT]
                          for name, t in self.world_tools.items()}
        self._cache: StatCache = {}
        self._files = self._snapshot_files()
        self._state = world.state()

    def ground(self, request: ActionRequest, offered: Collection[str] | None = None) -> Grounded:
        """`offered`: the tools this step's schema allowed (the levers may mask some); others are denied."""
        tool = self.world_tools.get(request.tool)
        if tool is None:
            known = ", ".join(self.schema_names)
            return self._malformed(request, f"unknown tool {request.tool!r}; the tools are {known}")
        if offered is not None and request.tool not in offered:
            return self._denied(request, f"tool {request.tool!r} was masked by the runtime for this step "
                                         f"(offered: {', '.join(offered)})")
        error = next(iter(self.validators[tool.name].iter_errors(request.args)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "args"
            return self._malformed(request, f"args of {tool.name} do not match its schema at {where}: {error.message}")
        args, reason = self._permit(tool, request.args)
        if reason is not None:
            return self._denied(request, reason)
        return self.execute(request, args, normalized=args != request.args)

    def check_skill_call(self, request: ActionRequest) -> Grounded | None:
        """The malformed result when a skill call's args miss its slots, else None."""
        error = next(iter(self.validators[request.tool].iter_errors(request.args)), None)
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "args"
        return self._malformed(request, f"args of skill {request.tool} do not match its slots at {where}: "
                                        f"{error.message}")

    def deny(self, request: ActionRequest, reason: str) -> Grounded:
        """A request the runtime refuses before the world sees it (recorded, the episode goes on)."""
        return self._denied(request, reason)

    @property
    def schema_names(self) -> list[str]:
        return [t.name for t in self.tools]

    @staticmethod
    def _denied(request: ActionRequest, reason: str) -> Grounded:
        executed = ExecutedAction(tool=request.tool, args=request.args, allowed=False, denied_reason=reason,
                                  status=ActionStatus.denied)
        return Grounded(executed, Effect(observation=f"denied: {reason}"))

    def _malformed(self, request: ActionRequest, why: str) -> Grounded:
        reason = f"malformed action: {why}"
        executed = ExecutedAction(tool=request.tool, args=request.args, allowed=False, denied_reason=reason,
                                  status=ActionStatus.error)
        return Grounded(executed, Effect(observation=f"error: {reason}", error=reason), failure="malformed")

    def _permit(self, tool: ToolSpec, args: dict[str, JsonValue]) -> tuple[dict[str, JsonValue], str | None]:
        """(args with paths normalized, denial reason or None)."""
        perms = self.small_world.permissions
        if tool.name not in self.small_world.tools:
            allowed = ", ".join(self.schema_names)
            return args, f"tool {tool.name!r} is not allowed in this small world (allowed: {allowed})"
        if "network" in tool.permissions and not perms.network:
            return args, f"tool {tool.name!r} needs the network, which this small world does not allow"
        out = dict(args)
        for key in self.path_args[tool.name]:
            raw = args.get(key)
            if not isinstance(raw, str):
                continue
            path, reason = normalize_path(raw, self.world.workdir)
            if reason is not None:
                return args, reason
            if "write" in tool.permissions:
                if matches(path, protected_scope(perms.protected)):
                    return args, f"{path} is protected: it must not change (protected: {', '.join(perms.protected)})"
                if not matches(path, perms.writable):
                    return args, f"{path} is not writable here (writable: {', '.join(perms.writable) or 'nothing'})"
            if "read" in tool.permissions and perms.readable and not matches(path, perms.readable):
                return args, f"{path} is not readable here (readable: {', '.join(perms.readable)})"
            out[key] = path
        return out, None

    def execute(self, request: ActionRequest, args: dict[str, JsonValue], *, normalized: bool = False) -> Grounded:
        """Run an allowed action in the world and measure what it changed."""
        action = ActionRequest(tool=request.tool, args=args, thought=request.thought, expect=request.expect)
        started = time.perf_counter()
        error: str | None = None
        result: Any = None
        try:
            result = self.world.step(action)
            _check_step(result)
        except Exception as err:  # a world fault is recorded on the step, never lost, never a success
            error = f"world raised {type(err).__name__}: {err}"
        duration_ms = (time.perf_counter() - started) * 1000 if self.record_timings else 0.0
        changes = self._changes()
        if error is not None:
            executed = ExecutedAction(tool=request.tool, args=args, allowed=True, duration_ms=duration_ms,
                                      status=ActionStatus.error)
            return Grounded(executed, Effect(observation=f"error: {error}", changes=changes, error=error),
                            failure="world")
        observation, reward, terminated, truncated, info = result
        shown, cut = truncate(observation, self.small_world.permissions.max_output_bytes)
        status = ActionStatus.normalized if normalized or cut else ActionStatus.ok
        executed = ExecutedAction(tool=request.tool, args=args, allowed=True, duration_ms=duration_ms, status=status)
        signal: dict[str, JsonValue] = {"reward": float(reward), "terminated": terminated, "truncated": truncated}
        if info:
            signal["info"] = _plain(info)
        feedback = [Feedback(source=self.small_world.world, kind="reward", content=signal)]
        touched = [c.target for c in changes if c.kind == "file"
                   and matches(c.target, self.small_world.permissions.protected)]
        if touched:
            feedback.append(Feedback(source="runtime", kind="protected_changed", content=list(touched)))
        return Grounded(executed, Effect(observation=shown, changes=changes), tuple(feedback),
                        terminated=terminated, truncated=truncated)

    def _snapshot_files(self) -> FileSnapshot:
        workdir = self.world.workdir
        return snapshot_workdir(workdir, self._cache) if workdir is not None else {}

    def _changes(self) -> list[Change]:
        files = self._snapshot_files()
        state = self.world.state()
        changes = diff_files(self._files, files) + diff_state(self._state, state)
        self._files, self._state = files, state
        return changes


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` UTF-8 bytes (never inside a character), with a mark saying how much went."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    kept = data[:limit].decode("utf-8", errors="ignore")
    return kept + TRUNCATION_MARK.format(n=len(data) - len(kept.encode("utf-8"))), True


def _properties(tool: ToolSpec) -> dict[str, dict[str, Any]]:
    props = tool.parameters.get("properties")
    return {k: v for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {}


def _check_step(result: Any) -> None:
    if not (isinstance(result, tuple) and len(result) == 5 and isinstance(result[0], str)
            and isinstance(result[1], int | float) and isinstance(result[2], bool) and isinstance(result[3], bool)
            and isinstance(result[4], dict)):
        raise WorldError(f"step returned {result!r:.120}, not (str, float, bool, bool, dict); run check_world on it")


def _plain(value: Any) -> JsonValue:
    """`value` as plain JSON; what is not JSON is kept as its repr, so recording never fails."""
    try:
        canonical_json(value)
        return value  # type: ignore[no-any-return]
    except (TypeError, ValueError):
        return repr(value)
