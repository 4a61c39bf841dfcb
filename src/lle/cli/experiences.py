"""`lle experiences list|show|import|export`."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import typer
from pydantic import ValidationError

from lle.cli.common import (
    MAX_ROWS,
    LatestRunOption,
    StrategyOption,
    WideOption,
    console,
    err_console,
    line,
    open_store,
    print_json,
    print_table,
    styled,
    table,
)
from lle.core import Experience
from lle.errors import InvalidInputError
from lle.governance.lineage import refuse_revoked
from lle.store import experiences as stored_experiences
from lle.viewer import lookup
from lle.viewer.data import intervention_text

app = typer.Typer(help="Recorded experiences.", no_args_is_help=True)


@app.command("list")
def list_(
    limit: int = typer.Option(50, min=1, max=MAX_ROWS),
    offset: int = typer.Option(0, min=0, max=MAX_ROWS),
    world: str | None = typer.Option(None, help="Only this world id."),
    split: str | None = typer.Option(None, help="train, dev or test."),
    outcome: str | None = typer.Option(None, help="pass, fail or unknown."),
    as_json: bool = typer.Option(False, "--json"),
    run: LatestRunOption = None,
    strategy: StrategyOption = None,
    wide: WideOption = False,
) -> None:
    """List experiences, oldest first."""
    with open_store(run, strategy, latest=True) as db:
        rows = db.list_experiences(limit=limit, offset=offset, world=world, split=split, outcome=outcome)
        short = lookup.short_ids([r.id for r in rows], stored_experiences.all_ids(db))
    if as_json:
        print_json([dataclasses.asdict(r) for r in rows])
        return
    # The creation time is in the id (a ULID) too: shown only with --wide, so 80 columns fit the rest.
    out = table("id", "world", "split", "outcome", "verification", "steps", *(["created"] if wide else []), wide=wide,
                ids=("id", "world"), flex=("verification",))
    for r in rows:
        outcome_text = f"{r.outcome} (revoked)" if r.revoked else r.outcome
        out.add_row(short[r.id], r.world, r.split, outcome_text, r.verification, str(r.n_steps),
                    *([r.created_at[:19]] if wide else []))
    print_table(out, wide)


@app.command("show")
def show(experience_id: str = typer.Argument(..., help="An experience id or a short one (as listed)."),
         as_json: bool = typer.Option(False, "--json"), run: LatestRunOption = None,
         strategy: StrategyOption = None) -> None:
    """Show one experience: each step as requested -> executed -> effect."""
    with open_store(run, strategy, latest=True) as db:
        experience_id = lookup.experience_id(db, experience_id)
        exp = db.get_experience(experience_id)
        stored = {e.id for e in exp.evidence}
        later = [e for e in db.evidence_for(exp.id) if e.id not in stored]
        revoked = experience_id in db.revoked_ids()
    if as_json:
        print_json(exp.model_dump(mode="json"))
        return
    sw = exp.small_world
    console.print(line(styled(exp.id, "bold"), styled("  REVOKED", "red") if revoked else ""))
    console.print(f"task {sw.id} ({sw.world}, project {sw.project}, {sw.split})  policy {exp.policy.model}")
    console.print(f"goal: {sw.goal}", highlight=False)
    for step in exp.steps:
        req, ex, eff = step.request, step.executed, step.effect
        console.print(line("\n", styled(f"step {step.index}", "bold")))
        for fb in step.feedback:  # what the runtime changed in this step's context, before the model acted
            if fb.kind == "intervention" and isinstance(fb.content, dict):
                console.print(f"  runtime    {intervention_text(fb.content)}", highlight=False, markup=False)
        console.print(f"  requested  {req.tool} {json.dumps(req.args)}", highlight=False)
        if req.expect:
            console.print(f"  expected   {req.expect}", highlight=False)
        if not ex.allowed:
            console.print(line("  executed   ", styled("DENIED", "red"), f": {ex.denied_reason}"))
        elif ex.status == "not_reported":
            console.print(line("  executed   ", styled("NOT REPORTED", "yellow"),
                               ": no result was reported by the client, so whether it ran is unknown"))
        elif (ex.tool, ex.args) != (req.tool, req.args):
            console.print(f"  executed   {ex.tool} {json.dumps(ex.args)} ({ex.status})", highlight=False)
        else:
            console.print(f"  executed   as requested ({ex.status}, {ex.duration_ms:.1f} ms)", highlight=False)
        obs = eff.observation if len(eff.observation) < 300 else eff.observation[:300] + "…"
        console.print(f"  effect     {obs}", highlight=False)
        for ch in eff.changes:
            console.print(f"             {ch.kind} {ch.target}: {ch.before} -> {ch.after}", highlight=False)
        if eff.error:
            console.print(f"  error      {eff.error}", highlight=False)
        for fb in step.feedback:
            content = fb.content if isinstance(fb.content, dict) else {}
            if fb.kind == "reward" and content.get("terminated"):
                info = content.get("info")
                success = info.get("success") if isinstance(info, dict) else None
                console.print(f"  world      reward {content.get('reward')}, success {success}", highlight=False)
            elif fb.kind == "stop":
                console.print(f"  stop       {content.get('reason')}: {content.get('detail')}", highlight=False)
    console.print(f"\noutcome {exp.outcome}  verification {exp.verification}  score {exp.score}  "
                  f"risk {', '.join(exp.risk_tags) or '-'}", highlight=False)
    if exp.credit:
        console.print("credit     " + "  ".join(f"{i}:{c:+.2f}" for i, c in enumerate(exp.credit)), highlight=False)
    if exp.attribution:
        console.print(f"attributed {exp.attribution.get('kind')}: {exp.attribution.get('reason')}", highlight=False)
    console.print(f"evidence ({len(later)} added later)" if later else "evidence")
    for ev in [*exp.evidence, *later]:
        where = f"step {ev.step}" if ev.step is not None else "episode"
        reason = ev.detail.get("reason", "") if isinstance(ev.detail, dict) else ""
        console.print(f"  {ev.anchor:<12} {ev.outcome:<7} {ev.strength:<5} {where:<8} {', '.join(ev.risk_tags)} "
                      f"{reason}", highlight=False)


def _read_experiences(path: Path) -> list[Experience]:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as err:
        raise InvalidInputError(f"cannot read {path}: {err.strerror}; check the path") from err
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {err.start}); give a JSON or JSONL file of "
                                "experiences, as `lle experiences export` writes") from err
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            docs = json.loads(stripped)
        elif stripped.startswith("{") and "\n{" not in stripped:
            docs = [json.loads(stripped)]
        else:
            docs = []
            for n, line in enumerate(stripped.splitlines(), 1):
                if line.strip():
                    try:
                        docs.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise InvalidInputError(
                            f"{path}:{n}: malformed JSON ({err.msg}); fix that line (one experience per line)"
                        ) from err
    except json.JSONDecodeError as err:
        raise InvalidInputError(
            f"{path}: malformed JSON at line {err.lineno} column {err.colno} ({err.msg}); fix the file"
        ) from err
    except InvalidInputError:
        raise
    except (ValueError, RecursionError) as err:  # nesting deeper than Python's stack, numbers past 4300 digits
        raise InvalidInputError(f"{path}: JSON past this reader's bounds ({type(err).__name__}: nesting too deep or "
                                "a number too long); give experiences as `lle experiences export` writes") from None
    experiences = []
    for n, doc in enumerate(docs, 1):
        try:
            experiences.append(Experience.model_validate(doc))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidInputError(
                f"{path}: experience #{n} is invalid at {where or 'top level'}: {first['msg']}; "
                "see `lle schema Experience`"
            ) from err
    return experiences


@app.command("import")
def import_(path: Path = typer.Argument(..., help="JSON (one object or a list) or JSONL; - for stdin.")) -> None:
    """Append experiences from a file, all or none."""
    experiences = _read_experiences(path)
    with open_store(write=True) as db:
        refuse_revoked(db, experiences)  # a copy of revoked content, exact or near, or from a revoked source
        stored = db.append_experiences(experiences)
    console.print(f"imported {len(stored)} experiences from {path}")


@app.command("export")
def export(world: str | None = typer.Option(None), split: str | None = typer.Option(None), run: LatestRunOption = None,
           strategy: StrategyOption = None) -> None:
    """Write experiences as JSONL to stdout; revoked ones are left out (counted on stderr)."""
    revoked = []
    with open_store(run, strategy, latest=True) as db:
        offset = 0
        while rows := db.list_experiences(limit=500, offset=offset, world=world, split=split):
            for row in rows:
                if row.revoked:
                    revoked.append(row.id)
                else:
                    print(db.get_experience(row.id).model_dump_json())
            offset += len(rows)
    if revoked:
        err_console.print(f"left out {len(revoked)} revoked experiences ({', '.join(revoked[:3])}"
                          f"{' …' if len(revoked) > 3 else ''})")
