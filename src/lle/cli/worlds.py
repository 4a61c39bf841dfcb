"""`lle worlds list|show|play`: the registered task families, one in detail, and a person playing one.

`play` goes through the same grounding as an agent (`lle.runtime.grounding.Grounder`): the same
tools, argument schemas, permissions and denials. A line is `tool {json args}` or the shorthand
`tool arg …` (the words fill the tool's required arguments in order; an array argument takes all
of them), so a session can be piped in: `printf 'look\\ngo north\\n' | lle worlds play toy/keys-v1`.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

import typer
from pydantic import JsonValue

from lle import registry
from lle.cli.common import console, err_console, print_json, settings
from lle.core import ActionRequest, SmallWorld, Split, ToolSpec
from lle.errors import InvalidInputError, LleError, RegistryError
from lle.worlds.base import TaskFamily, open_family

app = typer.Typer(help="Worlds: the registered task families, and playing one by hand.", no_args_is_help=True)

QUIT = {"quit", "exit", ":q"}
HELP = {"help", "?"}


# --- what is registered ------------------------------------------------------------------------------


def family_classes() -> dict[str, type[TaskFamily]]:
    """Registered ids whose entry point is a `TaskFamily` class (verifiers, stores and broken plugins left out).

    Only modules are imported: no family is built and no world started (a JVM-backed game is listed
    from its class alone). A plugin that fails to load or breaks the world contract is one `rejected:` line
    on stderr (naming its distribution and why) and the others are listed.
    """
    found: dict[str, type[TaskFamily]] = {}
    for id_ in registry.ids():
        try:
            factory = registry.spec(id_).load()
        except RegistryError as err:
            err_console.print(f"rejected: {str(err).splitlines()[0]}", highlight=False, soft_wrap=True)
            continue
        if inspect.isclass(factory) and issubclass(factory, TaskFamily):
            found[id_] = factory
    return found


def open_world_family(world_id: str) -> TaskFamily:
    """`open_family`, refusing ids that are registered but are not task families before building them."""
    factory = registry.spec(world_id).load()
    if not (inspect.isclass(factory) and issubclass(factory, TaskFamily)):
        raise RegistryError(f"{world_id} is registered but is not a TaskFamily "
                            f"({getattr(factory, '__name__', type(factory).__name__)}); "
                            "pick a world id from `lle worlds list`")
    return open_family(world_id)


def summary(family: type[TaskFamily] | TaskFamily) -> dict[str, Any]:
    """One row of `list` (plain JSON values), from the family's static metadata only."""
    row = family.info().as_json()
    levels = row["levels"]
    row["level_count"] = len(levels) if isinstance(levels, list) else 0
    return row


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List every registered task family from its class alone (nothing is built or started)."""
    rows = [summary(cls) for cls in family_classes().values()]
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table("id", "description", "projects", "tools", "anchor", "levels", "train", "dev", "test",
                  caption="-: unbounded (generated per seed) or counted only when the data is loaded")
    for row in rows:
        counts = ["-" if row["splits"][s.value] is None else str(row["splits"][s.value]) for s in Split]
        table.add_row(row["id"], row["description"], ", ".join(row["projects"]), ", ".join(row["tools"]),
                      row["anchor"], str(row["level_count"] or "-"), *counts)
    console.print(table)


# --- one world in detail -------------------------------------------------------------------------------


def describe(world_id: str) -> dict[str, Any]:
    """What `show` prints (plain JSON values)."""
    family = open_world_family(world_id)
    sample = family.small_world(Split.train, 0)
    world = family.make_world(sample)  # not reset: nothing starts (no JVM, no sandbox)
    try:
        tools = [{**tool.model_dump(mode="json", exclude={"version"}), "allowed": tool.name in sample.tools}
                 for tool in world.tools]
    finally:
        world.close()
    return {
        **summary(family),
        "tools": tools,
        "verifiers": list(sample.verifiers),
        "permissions": sample.permissions.model_dump(mode="json", exclude={"version"}),
        "limits": sample.limits.model_dump(mode="json", exclude={"version"}),
        "sample": {"id": sample.id, "split": sample.split.value, "seed": sample.seed, "project": sample.project,
                   "goal": sample.goal},
    }


@app.command("show")
def show(world_id: str = typer.Argument(..., help="A world id from `lle worlds list`."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show one world: tools with argument schemas and permissions, verifiers, a sample goal (train seed 0)."""
    info = describe(world_id)
    if as_json:
        print_json(info)
        return
    out = [f"{info['id']}  (family {info['family']}, version {info['version']}): {info['description']}",
           f"projects: {', '.join(info['projects'])}", f"anchor: {info['anchor']}",
           "tasks: " + ", ".join(f"{k} {'unbounded or not counted' if v is None else v}"
                                 for k, v in info["splits"].items()),
           f"levels: {'none' if not info['levels'] else str(len(info['levels'])) + ', easiest first'}",
           *(f"  {i}: {meaning}" for i, meaning in enumerate(info["levels"])),
           f"verifiers: {', '.join(info['verifiers']) or 'none'}",
           f"permissions: {json.dumps(info['permissions'], sort_keys=True)}",
           f"limits: {json.dumps(info['limits'], sort_keys=True)}", "tools:"]
    for tool in info["tools"]:
        flag = "" if tool["allowed"] else "  (exists, never allowed here)"
        out.append(f"  {tool['name']}: {tool['description']}{flag}")
        out.append(f"    args {json.dumps(tool['parameters'], sort_keys=True)}  needs {tool['permissions'] or '-'}")
    sample = info["sample"]
    out.append(f"sample {sample['id']} (seed {sample['seed']}): {sample['goal']}")
    # Plain print: rich would turn ids like `…:train:0` into emoji.
    print("\n".join(out))


@app.command("coverage")
def coverage_cmd(run_ref: str = typer.Argument("latest", metavar="RUN", help="A run id, a prefix, or latest."),
                 as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Which (world, project, level) cells a run's train draws and held-out set covered; flags held-out cells
    that no train draw reached."""
    from rich.table import Table

    from lle.flywheel import loop
    from lle.flywheel.evaluate import coverage
    from lle.viewer.lookup import resolve_run

    run_id = resolve_run(run_ref, settings.workspace)
    out = coverage(loop.run_folder(run_id, settings.workspace), loop.load_config(run_id, settings.workspace))
    if as_json:
        print_json(out)
        return
    table = Table("world", "project", "level", "train draws", "held-out", "")
    for cell in out["cells"]:
        table.add_row(cell["world"], cell["project"], cell["level"], str(cell["train"]), str(cell["held_out"]),
                      "no train draw reached it" if cell["unreached"] else "")
    console.print(table)
    print(f"{out['unreached']} held-out cell(s) that no train draw reached")


# --- playing by hand -----------------------------------------------------------------------------------------


def _coerce(text: str, schema: dict[str, Any], where: str) -> JsonValue:
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
        if kind == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
    except ValueError:
        raise InvalidInputError(f"{where} must be a {kind}, got {text!r}; write e.g. `{where.split()[0]} 5`") \
            from None
    return text


def parse_line(line: str, tools: dict[str, ToolSpec], allowed: list[str]) -> ActionRequest:
    """`tool {json}` or the shorthand `tool word …` -> an action (arguments not yet validated)."""
    name, _, rest = line.strip().partition(" ")
    rest = rest.strip()
    tool = tools.get(name)
    if tool is None:
        raise InvalidInputError(f"unknown tool {name!r}; the tools are {', '.join(allowed)} (type `help`)")
    if not rest:
        return ActionRequest(tool=name)
    if rest.startswith("{"):
        try:
            args = json.loads(rest)
        except json.JSONDecodeError as err:
            raise InvalidInputError(f"arguments of {name} are not JSON ({err.msg}); write e.g. "
                                    f"{name} {{\"key\": \"value\"}}") from None
        if not isinstance(args, dict):
            raise InvalidInputError(f"arguments of {name} must be a JSON object, got {rest!r}")
        return ActionRequest(tool=name, args=args)
    props = tool.parameters.get("properties")
    props = props if isinstance(props, dict) else {}
    listed = tool.parameters.get("required")
    required = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
    if not required:
        raise InvalidInputError(f"{name} takes no arguments; type just `{name}`")
    schemas = {k: v if isinstance(v, dict) else {} for k, v in props.items()}
    if len(required) == 1:
        key = required[0]
        schema = schemas.get(key, {})
        if schema.get("type") == "array":
            items = schema.get("items")
            item: dict[str, Any] = items if isinstance(items, dict) else {}
            words = rest.replace(",", " ").split()
            return ActionRequest(tool=name, args={key: [_coerce(w, item, f"{name} {key}") for w in words]})
        return ActionRequest(tool=name, args={key: _coerce(rest, schema, f"{name} {key}")})
    words = rest.split()
    if len(words) != len(required):
        raise InvalidInputError(f"{name} needs {len(required)} words ({' '.join(required)}), got {len(words)}; "
                                f"or write {name} {{json}}")
    return ActionRequest(tool=name, args={k: _coerce(w, schemas.get(k, {}), f"{name} {k}")
                                          for k, w in zip(required, words, strict=True)})


def usage(tools: list[ToolSpec]) -> str:
    lines = ["Type `tool {json args}` or `tool word …`; `help` shows this, `quit` stops."]
    for tool in tools:
        props = tool.parameters.get("properties")
        names = " ".join(f"<{k}>" for k in props) if isinstance(props, dict) else ""
        lines.append(f"  {tool.name} {names}".rstrip() + f"  — {tool.description}")
    return "\n".join(lines)


def _say(text: str) -> None:
    print(text, flush=True)


@app.command("play")
def play(
    world_id: str = typer.Argument(..., help="A world id from `lle worlds list`."),
    seed: int = typer.Option(0, "--seed", min=0, help="Task seed within the split."),
    split: Split = typer.Option(Split.train, "--split", help="train, dev or test."),
    project: str | None = typer.Option(None, "--project", help="Project inside the family (default: the seed's)."),
) -> None:
    """Play one small world by hand with the agent's tools, reading commands from stdin until it ends."""
    from lle.runtime.grounding import Grounder

    family = open_world_family(world_id)
    small_world: SmallWorld = family.small_world(split, seed, project=project)
    world = family.make_world(small_world)
    try:
        observation, _info = world.reset(seed=small_world.seed)
        grounder = Grounder(small_world, world)
        # Every tool of the world parses, as for an agent: one this small world does not allow is denied.
        tools = dict(grounder.world_tools)
        _say(f"{small_world.id} (project {small_world.project})\nGoal: {small_world.goal}\n{usage(grounder.tools)}")
        _say(f"\n{observation}")
        steps = 0
        while steps < small_world.limits.max_steps:
            sys.stdout.write("> ")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                _say("\n(input ended before the episode did)")
                raise typer.Exit(1)
            line = line.strip()
            if not line:
                continue
            if line in QUIT:
                _say("(stopped)")
                return
            if line in HELP:
                _say(usage(grounder.tools))
                continue
            try:
                request = parse_line(line, tools, small_world.tools)
            except InvalidInputError as err:
                _say(f"error: {err}")
                continue
            grounded = grounder.ground(request)
            if grounded.failure == "malformed":
                # An agent's episode would end here; a person gets another try.
                _say(f"{grounded.effect.observation} (not counted; try again)")
                continue
            steps += 1
            _say(grounded.effect.observation)
            if grounded.failure == "world":
                raise LleError(f"{world_id}: the world failed on `{line}`: {grounded.effect.error}; "
                               "report it with the world id and seed")
            if grounded.terminated or grounded.truncated:
                _say(_result(grounded.feedback))
                return
        _say(f"(step limit: {small_world.limits.max_steps} steps)")
    finally:
        world.close()


def _result(feedback: tuple[Any, ...]) -> str:
    for fb in feedback:
        if fb.kind == "reward" and isinstance(fb.content, dict):
            raw = fb.content.get("info")
            info: dict[str, Any] = raw if isinstance(raw, dict) else {}
            return f"episode over: reward {fb.content.get('reward')}, success {info.get('success')}"
    return "episode over"
