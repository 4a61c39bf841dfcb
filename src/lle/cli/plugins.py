"""`lle plugins`: every entry point of the `lle.plugins` group, what it is, who provides it, and why one failed.

Built-ins and outside plugins are listed alike (they register the same way). Loading a plugin
imports its module only: no world is built or started.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from importlib.metadata import entry_points

import typer

from lle import registry
from lle.cli.common import console, print_json
from lle.errors import RegistryError

KINDS_BY_PREFIX = {"verifier": "verifier", "store": "store", "wrapper": "wrapper", "policy": "policy"}


@dataclass(frozen=True)
class PluginRow:
    id: str
    kind: str
    """world (a TaskFamily), verifier, store, wrapper, policy, or other; `?` when it did not load."""
    distribution: str
    target: str
    """The entry point's value, `module:attr`."""
    error: str | None
    """Why it failed to load or register, or broke the world contract (one line), or None."""


def kind_of(id_: str, factory: object) -> str:
    from lle.worlds.base import TaskFamily  # lazy: listing verifiers should not need the worlds

    if inspect.isclass(factory) and issubclass(factory, TaskFamily):
        return "world"
    return KINDS_BY_PREFIX.get(id_.split("/", 1)[0], "other")


def rows() -> list[PluginRow]:
    """One row per entry point of the group, loaded to learn its kind; malformed names are rows too."""
    out: list[PluginRow] = []
    rejected = {(r.name, r.value): r for r in registry.rejected()}
    for ep in sorted(entry_points(group=registry.ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = registry.distribution(ep)
        bad = rejected.get((ep.name, ep.value))
        if bad is not None:
            out.append(PluginRow(ep.name, "?", dist, ep.value, bad.reason))
            continue
        spec = registry.spec(ep.name)
        if spec.entry_point != ep.value:  # two distributions claim one id: the first one found wins
            out.append(PluginRow(ep.name, "?", dist, ep.value, f"id taken by {spec.source}; bump the version (-vN+1)"))
            continue
        try:
            factory = spec.load()
        except RegistryError as err:
            out.append(PluginRow(ep.name, "?", dist, ep.value, str(err).splitlines()[0]))
            continue
        out.append(PluginRow(ep.name, kind_of(ep.name, factory), dist, ep.value, None))
    return out


def plugins(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List every `lle.plugins` entry point: id, kind, distribution, and why it failed to load."""
    found = rows()
    if as_json:
        print_json([asdict(r) for r in found])
        return
    from rich.table import Table

    table = Table("id", "kind", "distribution", "target", "status")
    for row in found:
        status = "ok" if row.error is None else f"rejected: {row.error}"
        table.add_row(row.id, row.kind, row.distribution, row.target, status)
    console.print(table)
