"""`lle evidence add|list`: human verdicts and everything known about an experience."""

from __future__ import annotations

import getpass

import typer

from lle.cli.common import RunOption, StrategyOption, console, open_store, print_json
from lle.core import Outcome
from lle.errors import InvalidInputError
from lle.evidence.evidence import decide
from lle.evidence.verifiers import human_verdict
from lle.viewer import lookup

app = typer.Typer(help="Evidence about experiences.", no_args_is_help=True)


@app.command("add")
def add(
    experience_id: str,
    outcome: str = typer.Option(..., "--outcome", help="pass or fail."),
    note: str = typer.Option(..., "--note", help="What you checked and saw."),
    author: str = typer.Option(None, "--author", help="Who (default: the current user)."),
) -> None:
    """Record a person's verdict on an experience (a hard anchor, appended; nothing is rewritten)."""
    if outcome not in ("pass", "fail"):
        raise InvalidInputError(f"--outcome {outcome!r} is not a verdict; use pass or fail")
    if not note.strip():
        raise InvalidInputError("--note is empty; say what you checked")
    with open_store(write=True) as db:
        exp = db.get_experience(lookup.experience_id(db, experience_id))
        ev = human_verdict(exp.id, exp.small_world, Outcome(outcome), note, author or getpass.getuser())
        db.append_evidence(ev)
        now, level = decide(db.evidence_for(exp.id))
    console.print(f"{ev.id}: {outcome} by {ev.detail['author']} on {exp.id}; "  # type: ignore[index,call-overload]
                  f"outcome now {now}, verification {level}", highlight=False)


@app.command("list")
def list_(experience_id: str = typer.Argument(..., help="An experience id or a unique prefix of one."),
          as_json: bool = typer.Option(False, "--json"), run: RunOption = None,
          strategy: StrategyOption = None) -> None:
    """All evidence about an experience, including what was added after it was stored."""
    with open_store(run, strategy) as db:
        experience_id = lookup.experience_id(db, experience_id)  # an unknown id is an error, not an empty list
        found = db.evidence_for(experience_id)
    if as_json:
        print_json([e.model_dump(mode="json") for e in found])
        return
    for e in found:
        console.print(f"{e.id}  step {e.step if e.step is not None else '-'}  {e.anchor:<12} {e.outcome:<7} "
                      f"{e.strength:<5} {', '.join(e.risk_tags)}", highlight=False)
