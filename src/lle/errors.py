"""Errors that teach: each names the input that failed and the fix.

Every error lle raises on purpose derives from `LleError`; the CLI prints its message on one line
and exits with code 2. Stop conditions of the episode loop live with the harness, not here.
"""

from __future__ import annotations


class LleError(Exception):
    """Root of lle's own errors. `str(err)` is one line: what failed, on which input, the fix."""

    exit_code = 2


class UnknownIdError(LleError, KeyError):
    def __init__(self, kind: str, id_: str, fix: str = "list what exists with `lle experiences list`") -> None:
        super().__init__(f"no {kind} with id {id_!r}; {fix}")
        self.id = id_

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class InvalidInputError(LleError, ValueError):
    """Input that does not parse or validate (a file, an argument, a JSON document)."""


class RegistryError(LleError):
    """A registry id that is malformed, unknown, or whose entry point fails to load."""


class StoreError(LleError):
    """Base of store failures."""


class NotAStoreError(StoreError):
    """The file is not an lle store (not SQLite, truncated, or another program's database)."""


class NewerSchemaError(StoreError):
    """The store was written by a newer lle; this version may read it but never writes to it."""


class ReadOnlyStoreError(StoreError):
    """The store's file, folder or disk cannot be written: it is opened for reading only."""


class DiskFullError(StoreError):
    """A write failed because the disk is full; the transaction was rolled back whole."""


class LedgerImmutableError(StoreError):
    """An attempt to change or delete a ledger row; append a revocation instead."""


class WorkspaceError(LleError):
    """The workspace folder cannot be used."""


class SandboxUnavailableError(LleError):
    """Untrusted code was to run but bubblewrap is missing or cannot start."""


class ModelError(LleError):
    """A model file is missing, unreadable, or its sha256 differs from the catalog's."""


class PolicyBackendError(LleError):
    """A policy backend (embedded model or server) failed: unreachable, timed out, or answered garbage."""


class WorldError(LleError):
    """A world was misconfigured or broke its contract (see `check_world`)."""


class EpisodeError(LleError):
    """Episodes could not run to their end (world would not build, replay diverged, worker died).

    They stay resumable."""
