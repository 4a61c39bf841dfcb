"""Reading a population file (TOML) into a `PopulationConfig`; a bad file is one line naming the file,
the key and the fix. The world is checked against the registry, and each model against the catalog
or the file system, before anything runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from lle.core import Split
from lle.errors import InvalidInputError, LleError
from lle.population.types import PopulationConfig

FIX = "see examples/populations/arith-trio.toml and docs/95-population.md"


def parse_population(text: str, *, origin: str) -> PopulationConfig:
    """Validate a population's TOML text (`origin` names it in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InvalidInputError(f"population {origin} is not valid TOML ({err}); fix the file") from None
    try:
        config = PopulationConfig.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(_part(data, first["loc"])) or "the file"
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown key; remove it or check its spelling"
        elif first["type"] == "missing":
            message = "missing; add it"
        raise InvalidInputError(f"population {origin}: {where}: {message} ({FIX})") from None
    _check_world(config, origin)
    return config


def _part(data: object, loc: tuple[int | str, ...]) -> list[str]:
    # agents.1.temperature reads better as agents[1] ("slow") .temperature for the person fixing it
    out: list[str] = []
    node = data
    for key in loc:
        if isinstance(key, int) and isinstance(node, list) and key < len(node):
            node = node[key]
            name = node.get("name") if isinstance(node, dict) else None
            out[-1] = f"{out[-1]}[{key}]" + (f" ({name})" if isinstance(name, str) else "")
            continue
        out.append(str(key))
        node = node.get(key) if isinstance(node, dict) else None
    return out


def _check_world(config: PopulationConfig, origin: str) -> None:
    from lle.worlds.base import cut, open_family  # the registry loads plugins: only once the file parsed

    families = []
    for world in config.worlds:
        try:
            family = open_family(world)
            family.check_level(config.level)
        except LleError as err:
            raise InvalidInputError(f"population {origin}: world: {str(err).splitlines()[0]}") from None
        families.append(family)
    # The last train seed each use needs must exist (a level's train split can be small: 161 tasks at arith 0).
    # Draws take the worlds in turn (`run.train_worlds`): draw i is world i % k at its train seed i // k.
    needs = [("train", config.rounds * config.train - 1)]
    needs += [(f"agents ({a.name}).train_start", a.train_start + config.replay - 1) for a in config.agents]
    for key, last in needs:
        for draw in range(max(0, last - len(families) + 1), last + 1):
            seed = draw // len(families)
            try:
                cut(families[draw % len(families)], Split.train, seed, level=config.level)
            except LleError as err:
                raise InvalidInputError(f"population {origin}: {key}: needs train seed {seed}, but "
                                        f"{str(err).splitlines()[0]}") from None


def load_population(path: str | Path) -> PopulationConfig:
    """A population file; one-line errors name it and the fix."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InvalidInputError(f"population file {path} does not exist; pass the path of a .toml population ({FIX})")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidInputError(f"population file {path} cannot be read ({err}); give a UTF-8 TOML file") from None
    return parse_population(text, origin=str(path))
