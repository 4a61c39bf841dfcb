"""π for tests and demos: a fixed list of actions, or a function of the context.

Deterministic by construction, so two runs of the same scripted episode record the same steps;
that is what the crash and parallel tests compare. A script's sha256 is its "weights" hash: resume
refuses to continue an episode with a script that changed since it started.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lle.core import ActionRequest, Context, LLMCall, PolicyInfo, Step, canonical_json
from lle.errors import InvalidInputError

ActionLike = ActionRequest | Mapping[str, Any]
ScriptFunction = Callable[[Context], ActionLike]


def to_action(value: ActionLike, where: str = "action") -> ActionRequest:
    if isinstance(value, ActionRequest):
        return value
    try:
        return ActionRequest.model_validate(dict(value))
    except (ValidationError, TypeError, ValueError) as err:
        raise InvalidInputError(
            f"{where} is not an action ({str(err).splitlines()[0]}); write {{\"tool\": …, \"args\": {{…}}}}"
        ) from err


class ScriptedPolicy:
    """Plays `script`: a list of actions (one per step) or `fn(context) -> action`.

    A list keeps its position; `resume_from(history)` moves it past the steps already committed, so
    a resumed episode continues exactly where the killed one stopped. Running out of actions raises
    `InvalidInputError`, which the harness records as a failed step (`PolicyFailed`).
    """

    def __init__(self, script: Sequence[ActionLike] | ScriptFunction, *, name: str = "scripted",
                 spec: str | None = None) -> None:
        self.spec = spec
        """How to rebuild this policy (`scripted:PATH`), stored with the episode for resume."""
        self.position = 0
        if callable(script):
            self.fn: ScriptFunction | None = script
            self.actions: list[ActionRequest] = []
            label = f"{getattr(script, '__module__', '?')}.{getattr(script, '__qualname__', repr(script))}"
            self.info = PolicyInfo(model=name, params={"function": label})
        else:
            self.fn = None
            self.actions = [to_action(a, f"action #{i + 1}") for i, a in enumerate(script)]
            body = canonical_json([a.model_dump(mode="json") for a in self.actions])
            params: dict[str, Any] = {"actions": len(self.actions)}
            if spec:
                params["source"] = spec
            self.info = PolicyInfo(model=name, sha256=hashlib.sha256(body.encode()).hexdigest(), params=params)

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedPolicy:
        """Load actions from a JSON list or a JSONL file (one action object per line)."""
        path = Path(path).expanduser().resolve()
        try:
            text = path.read_text()
        except OSError as err:
            raise InvalidInputError(f"cannot read the script {path}: {err.strerror}; check the path") from err
        except UnicodeDecodeError as err:
            raise InvalidInputError(f"the script {path} is not UTF-8 text (byte {err.start}); give a JSON list or "
                                    "JSONL of {tool, args} action objects") from err
        stripped = text.strip()
        docs: list[Any] = []
        if stripped.startswith("["):
            try:
                docs = json.loads(stripped)
            except json.JSONDecodeError as err:
                raise InvalidInputError(f"{path}: malformed JSON at line {err.lineno} ({err.msg}); fix the file") \
                    from err
        else:
            for n, line in enumerate(stripped.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    docs.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise InvalidInputError(f"{path}:{n}: malformed JSON ({err.msg}); one action object per line") \
                        from err
        if not docs:
            raise InvalidInputError(f"{path} holds no actions; write a JSON list or JSONL of {{tool, args}} objects")
        actions = [to_action(d, f"{path} action #{i + 1}") for i, d in enumerate(docs)]
        return cls(actions, spec=f"scripted:{path}")

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        if self.fn is not None:
            return to_action(self.fn(context), "the script function's result"), None
        if self.position >= len(self.actions):
            raise InvalidInputError(
                f"the script has {len(self.actions)} actions and step {self.position} asked for one more; "
                "end the script with an action that ends the episode (e.g. submit)"
            )
        action = self.actions[self.position]
        self.position += 1
        return action, None

    def resume_from(self, history: Sequence[Step]) -> None:
        """Continue after the `history` already committed (the runtime calls this on resume)."""
        self.position = len(history)
