"""Tool sets -> the one JSON schema every action is decoded under.

One `anyOf` branch per tool, each fixing `tool` to a constant and `args` to that tool's schema, with
`thought` first (the model reasons before it commits to a tool) and `expect` last (its predicted
effect, compared later with the real one).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema

from lle.core import ActionRequest, ToolSpec
from lle.errors import InvalidInputError

NO_ACTION = "<none>"
"""Tool name recorded when the policy failed before producing an action (the harness writes it; the
dataset never trains on it)."""


def action_schema(tools: list[ToolSpec]) -> dict[str, Any]:
    """The JSON schema of an action over `tools`."""
    if not tools:
        raise InvalidInputError("a small world needs at least one tool (e.g. `submit`); add it to its tool set")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"tool names repeat in {names}; give each tool one name")
    branches = []
    for tool in tools:
        params = dict(tool.parameters)
        params.setdefault("type", "object")
        branches.append({
            "type": "object",
            "properties": {
                "thought": {"type": "string"},
                "tool": {"const": tool.name},
                "args": params,
                "expect": {"type": "string"},
            },
            "required": ["thought", "tool", "args", "expect"],
            "additionalProperties": False,
        })
    return {"anyOf": branches}


def parse_action(schema: dict[str, Any], document: Any) -> ActionRequest:
    """Validate a decoded action against `schema`; raise `InvalidInputError` naming what is wrong."""
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError as err:
        best = jsonschema.exceptions.best_match([err])
        where = "/".join(str(p) for p in best.absolute_path) or "action"
        raise InvalidInputError(f"action does not match the tool schema at {where}: {best.message}") from err
    return ActionRequest(tool=document["tool"], args=document["args"], thought=document.get("thought", ""),
                         expect=document.get("expect", ""))


# What the output format shows in place of `thought` and `expect`. Small models copy example values
# into their actions, so these read as slots to fill, and a copy is flagged (`copies_placeholder`).
THOUGHT_SLOT = "<your reason, a few words>"
EXPECT_SLOT = "<the result you predict>"
_COPIED = {"why this tool now", "what you predict it will return", "your reason a few words",
           "the result you predict", "your reason", "the result"}


def copies_placeholder(text: str) -> bool:
    """True when `text` is the output format's slot (or an older example value), not the model's own words."""
    words = " ".join(re.findall(r"[a-z]+", text.lower()))
    return bool(words) and words in _COPIED


def cap_free_text(schema: dict[str, Any], *, thought_chars: int | None, expect_chars: int | None) -> dict[str, Any]:
    """`schema` with `maxLength` on every branch's `thought` and `expect` (their token budgets)."""
    caps = {"thought": thought_chars, "expect": expect_chars}
    if not any(caps.values()):
        return schema
    branches = []
    for branch in schema.get("anyOf", []):
        props = dict(branch["properties"])
        for key, cap in caps.items():
            if cap:
                props[key] = {**props[key], "maxLength": cap}
        branches.append({**branch, "properties": props})
    return {"anyOf": branches}


# Lean actions: the same action under short keys, decoded with no whitespace between JSON tokens (the
# grammar forbids it), so that a step's generated tokens go to content. Each key is one token in
# SmolLM2's vocabulary, and "why"/"exp" still say what to write to a small model reading the prompt.
LEAN_KEYS = {"thought": "why", "tool": "tool", "args": "args", "expect": "exp"}
_FULL_KEYS = {short: full for full, short in LEAN_KEYS.items()}


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (from `action_schema`, capped or masked or not) with each branch's keys renamed to
    `LEAN_KEYS`, their order and their value schemas unchanged (`args` stays the tool's own schema)."""
    branches = []
    for branch in schema.get("anyOf", []):
        props = {LEAN_KEYS.get(key, key): value for key, value in branch.get("properties", {}).items()}
        required = [LEAN_KEYS.get(key, key) for key in branch.get("required", [])]
        branches.append({**branch, "properties": props, "required": required})
    return {"anyOf": branches}


def from_lean(document: Any) -> Any:
    """A decoded lean action with its full keys back, for `parse_action` against the full schema; anything
    but an object is returned as it is (and then fails validation there)."""
    if not isinstance(document, dict):
        return document
    return {_FULL_KEYS.get(key, key): value for key, value in document.items()}


def output_format(lean: bool = False) -> str:
    """The example action the prompt's output format shows: full keys, or the lean ones with no spaces."""
    if lean:
        k = LEAN_KEYS
        return (f'{{"{k["thought"]}":"{THOUGHT_SLOT}","{k["tool"]}":"<tool name>","{k["args"]}":{{<its arguments>}},'
                f'"{k["expect"]}":"{EXPECT_SLOT}"}}')
    return (f'{{"thought": "{THOUGHT_SLOT}", "tool": "<tool name>", "args": {{<its arguments>}}, '
            f'"expect": "{EXPECT_SLOT}"}}')
