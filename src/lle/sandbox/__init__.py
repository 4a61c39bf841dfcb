"""Run untrusted commands under bubblewrap (DESIGN §6); below the worlds that run code and the runtime."""

from lle.sandbox.bubblewrap import (
    Sandbox,
    SandboxLimits,
    SandboxResult,
    bwrap_available,
    read_file_nofollow,
)

__all__ = ["Sandbox", "SandboxLimits", "SandboxResult", "bwrap_available", "read_file_nofollow"]
