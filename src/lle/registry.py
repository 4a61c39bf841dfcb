"""Versioned ids -> factories, loaded lazily (Gymnasium's registry, `llm`'s plugins).

An id is `family/name-vN` (e.g. `toy/keys-v1`, `store/sqlite-v1`). Built-ins are declared as
entry points of the group `lle.plugins` in lle's own pyproject, exactly like outside plugins, so
there is one path for both. An entry point's name is the id and its value `module:attr`; nothing
is imported until `make` needs it. A class that declares an `id` (a `TaskFamily`) must declare the
entry point's name. An entry point whose name is not a well-formed id is not registered but is
reported: logged once, listed by `rejected()` and by `lle plugins` (which lists every entry point,
its distribution, and why one failed to load). A `TaskFamily` class that breaks the world contract
(`lle.worlds.base.contract_problem`) is rejected when loaded: a one-line `RegistryError` naming its
distribution, so `lle worlds list` and `lle plugins` report it and go on with the others.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from lle.errors import RegistryError

ENTRY_POINT_GROUP = "lle.plugins"
log = logging.getLogger(__name__)
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9_.-]*-v(\d+)$")


@dataclass(frozen=True)
class Spec:
    id: str
    entry_point: str | Callable[..., Any]
    """`module:attr`, or the factory itself."""
    source: str
    """`entry-point:<distribution>` or `register`."""

    def load(self) -> Callable[..., Any]:
        obj: Any = self.entry_point if not isinstance(self.entry_point, str) else self._import(self.entry_point)
        if not callable(obj):
            raise RegistryError(
                f"{self.id}: entry point {self.entry_point!r} is not callable; point it at a class or function"
            )
        declared = getattr(obj, "id", None) if isinstance(obj, type) else None
        if isinstance(declared, str) and declared != self.id:
            raise RegistryError(
                f"{self.id}: entry point {self.entry_point!r} ({self.source}) declares id {declared!r}; "
                f"the entry point's name and the class's id must be equal: rename one of them"
            )
        # A TaskFamily's module imported lle.worlds.base already (so loading a verifier never imports the worlds).
        base = sys.modules.get("lle.worlds.base")
        if base is not None and isinstance(obj, type) and issubclass(obj, base.TaskFamily):
            problem = _contract(obj)
            if problem is not None:
                raise RegistryError(f"{self.id} (from {self.distribution}) breaks the world contract: {problem}")
        return obj  # type: ignore[no-any-return]

    @property
    def distribution(self) -> str:
        """The distribution that declares it, or `register` (a `register()` call)."""
        return self.source.removeprefix("entry-point:")

    def _import(self, target: str) -> Any:
        module_name, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as err:
            raise RegistryError(
                f"{self.id}: entry point {target!r} ({self.source}) failed to load: {err}; "
                "fix the plugin's entry point or install what it needs"
            ) from err
        return obj


@cache
def _contract(cls: type) -> str | None:
    """Why a world class breaks the contract (`lle.worlds.base.contract_problem`), checked once per class."""
    problem: str | None = sys.modules["lle.worlds.base"].contract_problem(cls)
    return problem


@dataclass(frozen=True)
class Rejected:
    """An entry point of the group that was not registered, and why."""

    name: str
    value: str
    distribution: str
    reason: str


_specs: dict[str, Spec] = {}
_rejected: list[Rejected] = []
_entry_points_loaded = False
_entry_points_lock = threading.Lock()


def check_id(id_: str) -> str:
    if not ID_PATTERN.match(id_):
        raise RegistryError(
            f"registry id {id_!r} is malformed; use `family/name-vN` in lower case, e.g. `toy/keys-v1`"
        )
    return id_


def register(id_: str, entry_point: str | Callable[..., Any], *, replace: bool = False) -> None:
    """Register a factory under a versioned id. Registering a taken id needs `replace=True`."""
    check_id(id_)
    if isinstance(entry_point, str) and ":" not in entry_point:
        raise RegistryError(f"{id_}: entry point {entry_point!r} must look like `package.module:attr`")
    _load_entry_points()
    if id_ in _specs and not replace:
        raise RegistryError(
            f"{id_} is already registered ({_specs[id_].source}); bump the version (-vN+1) or pass replace=True"
        )
    _specs[id_] = Spec(id_, entry_point, "register")


def _load_entry_points() -> None:
    # Under a lock, and marked loaded only when done: episodes in threads (ThreadBackend) look ids up
    # at once, and one that came while another was loading saw an empty registry.
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    with _entry_points_lock:
        if not _entry_points_loaded:
            _register_entry_points()
            _entry_points_loaded = True


def _register_entry_points() -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = distribution(ep)
        if not ID_PATTERN.match(ep.name):
            # A malformed outside plugin must not break lle: it is left out, and said so.
            reason = (f"entry point name {ep.name!r} is not a well-formed id; rename it `family/name-vN` "
                      "in lower case (e.g. `demo/counter-v1`) in the plugin's pyproject")
            _rejected.append(Rejected(ep.name, ep.value, dist, reason))
            log.warning("lle.plugins: %s (from %s) not registered: %s", ep.name, dist, reason)
            continue
        _specs.setdefault(ep.name, Spec(ep.name, ep.value, f"entry-point:{dist}"))


def distribution(ep: EntryPoint) -> str:
    """The name of the installed distribution that declares `ep` (`?` when unknown)."""
    return ep.dist.name if ep.dist is not None else "?"


def rejected() -> list[Rejected]:
    """Entry points of `lle.plugins` that were not registered (malformed names), with the fix."""
    _load_entry_points()
    return list(_rejected)


def specs() -> list[Spec]:
    """Every registered spec (entry points and `register` calls), sorted by id; nothing is imported."""
    _load_entry_points()
    return [_specs[i] for i in sorted(_specs)]


def spec(id_: str) -> Spec:
    _load_entry_points()
    try:
        return _specs[id_]
    except KeyError:
        family = id_.split("/", 1)[0]
        near = [s for s in _specs if s.startswith(family + "/")] or sorted(_specs)
        bad = next((r for r in _rejected if r.name == id_), None)
        if bad is not None:
            raise RegistryError(f"{id_!r} (from {bad.distribution}) was not registered: {bad.reason}") from None
        raise RegistryError(f"no registered id {id_!r}; known: {', '.join(sorted(near)) or 'none'}") from None


def make(id_: str, **kwargs: Any) -> Any:
    """Build the object registered under `id_`, passing `kwargs` to its factory."""
    return spec(id_).load()(**kwargs)


def ids(prefix: str = "") -> list[str]:
    """Registered ids, sorted, optionally only those starting with `prefix` (e.g. `toy/`)."""
    _load_entry_points()
    return sorted(i for i in _specs if i.startswith(prefix))
