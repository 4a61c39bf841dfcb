"""`lle skills list|show|retire|export|import`."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Any

import typer

from lle.carriers.skill_mining import render_call
from lle.carriers.skills import Skill, SkillLibrary, SkillState
from lle.cli.common import (
    LatestRunOption,
    StrategyOption,
    WideOption,
    console,
    open_store,
    print_json,
    print_table,
    table,
)
from lle.errors import InvalidInputError
from lle.store import Store
from lle.viewer import lookup

app = typer.Typer(help="Skills: macros of tool calls mined from verified successes, offered after replay.",
                  no_args_is_help=True)


def _row(skill: Skill) -> dict[str, Any]:
    desc = skill.descriptor
    return {"id": skill.item_id, "name": desc.name, "version": desc.version, "state": skill.state.value,
            "family": desc.family, "kind": desc.kind, "tool": skill.spec.name, "slots": [s.name for s in desc.slots],
            "support": desc.evidence.support, "projects": desc.evidence.projects,
            "expires_at": desc.expires_at.isoformat() if desc.expires_at else None,
            "macro": " -> ".join(render_call(c) for c in desc.calls) if desc.program is None else
            f"program over {', '.join(desc.tools)} ({len(desc.program.splitlines())} lines)"}


def skill_ref(db: Store, ref: str) -> str:
    """A skill name as it is; else a skill id, short ones (as listed) completed to the one skill id they name."""
    if ref.removeprefix("skill_") in {s.name for s in SkillLibrary(db).skills()}:
        return ref
    return lookup.item_id(db, ref, "skills")


@app.command("list")
def list_(
    state: SkillState | None = typer.Option(None, help="Only skills in this state."),
    family: str | None = typer.Option(None, help="Only this task family."),
    as_json: bool = typer.Option(False, "--json"),
    run: LatestRunOption = None,
    strategy: StrategyOption = None,
    wide: WideOption = False,
) -> None:
    """List skills, oldest first, with their state."""
    with open_store(run, strategy, latest=True) as db:
        skills = [s for s in SkillLibrary(db).skills(family) if state is None or s.state is state]
        short = lookup.short_ids([s.item_id for s in skills], lookup.item_ids(db, "skills"))
    if as_json:
        print_json([_row(s) for s in skills])
        return
    out = table("id", "name", "v", "state", "support", "macro", wide=wide)
    for s in skills:
        row = _row(s)
        out.add_row(short[s.item_id], s.name, str(s.descriptor.version), s.state.value,
                    f"{row['support']} in {len(row['projects'])}", row["macro"])
    print_table(out, wide)


@app.command("show")
def show(
    ref: str = typer.Argument(..., help="A skill id (itm_…, or a short one as listed) or name (its latest version)."),
    as_json: bool = typer.Option(False, "--json"),
    run: LatestRunOption = None,
    strategy: StrategyOption = None,
) -> None:
    """Show one skill: its descriptor, state and lifecycle (every update, with gate reasons)."""
    with open_store(run, strategy, latest=True) as db:
        library = SkillLibrary(db)
        skill = library.get(skill_ref(db, ref))
        history = db.list_updates(limit=1_000_000, carrier="skills")
        uses = library.uses(skill.item_id)
    updates = [u for u in history if u.item_id == skill.item_id]
    if as_json:
        print_json({**_row(skill), "descriptor": skill.descriptor.model_dump(mode="json"),
                    "lineage": {"experience_ids": skill.item.experience_ids, "derived_from": skill.item.derived_from},
                    "updates": [u.model_dump(mode="json") for u in updates],
                    "uses": [{"experience_id": i, "outcome": o.value} for i, o in uses]})
        return
    row, desc = _row(skill), skill.descriptor
    console.print(f"{skill.item_id}  {desc.name} v{desc.version}  [{skill.state}]  tool {row['tool']}", highlight=False)
    console.print(f"macro      {row['macro']}", highlight=False)
    console.print(f"slots      {', '.join(row['slots']) or '-'}", highlight=False)
    console.print(f"pre        {', '.join(desc.preconditions) or '-'}", highlight=False)
    console.print(f"post       {', '.join(desc.postconditions) or '-'}", highlight=False)
    console.print(f"support    {desc.evidence.support} small worlds, {', '.join(desc.evidence.projects) or '-'}"
                  f"{', from ' + desc.evidence.origin if desc.evidence.origin else ''}", highlight=False)
    console.print(f"uses       {len(uses)} ({sum(o.value == 'pass' for _, o in uses)} passed)", highlight=False)
    for u in updates:
        gate = f"{u.gate.name}: {'; '.join(u.gate.reasons)}" if u.gate else ""
        console.print(f"  {u.at.isoformat()[:19]}  {u.op:<9} {u.actor:<8} {gate}", highlight=False)


@app.command("retire")
def retire(
    ref: str = typer.Argument(..., help="A skill id or name."),
    reason: str = typer.Option(..., "--reason", help="Why (recorded with the retirement)."),
    author: str = typer.Option(None, "--author", help="Who (default: the current user)."),
) -> None:
    """Retire a skill: it is no longer offered (appends one update; nothing is deleted)."""
    with open_store(write=True) as db:
        update = SkillLibrary(db).retire(skill_ref(db, ref), reason, author or getpass.getuser())
    console.print(f"{update.id}: retired {update.item_id}", highlight=False)


@app.command("export")
def export(
    ref: str = typer.Argument(..., help="A skill id or name."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write here instead of stdout."),
) -> None:
    """Write the skill's descriptor as JSON (another workspace imports it as a candidate)."""
    with open_store() as db:
        text = json.dumps(SkillLibrary(db).export(skill_ref(db, ref)), indent=2, ensure_ascii=False)
    if output is None:
        print(text)
    else:
        output.write_text(text + "\n")


@app.command("import")
def import_(
    source: str = typer.Argument(..., help="A descriptor JSON file, or - for stdin."),
    author: str = typer.Option(None, "--author", help="Who (default: the current user)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Add a skill descriptor as a candidate; it is offered only after it validates here."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as err:
        raise InvalidInputError(f"cannot read {source}: {err.strerror}; check the path") from err
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"{source} is not UTF-8 text (byte {err.start}); give a descriptor as "
                                "`lle skills export` writes") from err
    with open_store(write=True) as db:
        try:
            skill = SkillLibrary(db).import_descriptor(text, actor=author or getpass.getuser())
        except InvalidInputError as err:
            raise InvalidInputError(f"{source}: {err}") from None
    if as_json:
        print_json(_row(skill))
        return
    console.print(f"{skill.item_id}: imported {skill.name} v{skill.descriptor.version} as a candidate",
                  highlight=False)
