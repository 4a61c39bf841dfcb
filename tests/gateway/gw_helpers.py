"""What the gateway tests share besides fixtures: tokens and a tool list."""

from __future__ import annotations

TOKEN = "test-token-alice"
OTHER = "test-token-bob"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OTHER_AUTH = {"Authorization": f"Bearer {OTHER}"}
TOOLS = [{"type": "function", "function": {"name": "run_tests", "description": "Run the project's tests.",
                                           "parameters": {"type": "object", "properties": {}}}}]
