"""`lle schema [TYPE]`: the JSON Schema of lle's persisted types."""

from __future__ import annotations

import typer

from lle.cli.common import print_json
from lle.config import PERSISTED_TYPES
from lle.errors import InvalidInputError


def schema(
    type_name: str = typer.Argument(None, metavar="[TYPE]", help="e.g. Experience; omit to list types."),
) -> None:
    """Print the JSON Schema of a core type, or list the types."""
    if type_name is None:
        for name in PERSISTED_TYPES:
            print(name)
        return
    cls = PERSISTED_TYPES.get(type_name)
    if cls is None:
        raise InvalidInputError(f"no type {type_name!r}; run `lle schema` to list them (e.g. Experience, Step)")
    print_json(cls.model_json_schema())
