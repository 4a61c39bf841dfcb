"""Open episodes, durable: one append-only JSON-lines journal per episode until it ends.

A step is not final when its call returns (its effect arrives with the agent's next call, and
feedback may follow), and the ledger is append-only, so open episodes live here and go to the
store whole at `end`. Each event is one line written and flushed before the next event of that
episode: a gateway process that dies loses at most the call in flight (`fsync=True` also survives
a power cut, at a cost per call). On start the gateway reads every journal back; one whose
experience is already stored (a crash between storing and deleting) is deleted.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from lle.gateway.capture import CallRecord, FeedbackBody


@dataclass
class OpenEpisode:
    """An episode between its first call and its end, rebuilt from its journal after a restart."""

    client: str
    episode: str
    experience_id: str
    project: str
    calls: list[CallRecord] = field(default_factory=list)
    feedback: list[tuple[int, FeedbackBody]] = field(default_factory=list)
    ended: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one journal event into the state (the same code runs live and on replay)."""
        kind = event["kind"]
        if kind == "call":
            self.calls.append(CallRecord(**event["call"]))
        elif kind == "effect":
            self.calls[int(event["step"])].results.update(event["results"])
        elif kind == "feedback":
            self.feedback.append((int(event["step"]), FeedbackBody.model_validate(event["body"])))


class Journal:
    """The folder of open-episode journals (`WORKSPACE/gateway/open/CLIENT/EPISODE.jsonl`)."""

    MAX_OPEN_FILES = 256

    def __init__(self, root: Path, *, fsync: bool = False) -> None:
        self.root = root / "gateway" / "open"
        self.fsync = fsync
        self.root.mkdir(parents=True, exist_ok=True)
        # Files stay open between lines (opening one cost ~0.25 ms a call on a busy disk); the least
        # recently used is closed past MAX_OPEN_FILES.
        self._files: OrderedDict[Path, TextIO] = OrderedDict()

    def _file(self, path: Path) -> TextIO:
        fh = self._files.pop(path, None)
        if fh is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = path.open("a", encoding="utf-8")
            while len(self._files) >= self.MAX_OPEN_FILES:
                self._files.popitem(last=False)[1].close()
        self._files[path] = fh
        return fh

    def path(self, client: str, episode: str) -> Path:
        return self.root / client / f"{episode}.jsonl"

    def append(self, ep: OpenEpisode, event: dict[str, Any]) -> None:
        line = json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
        fh = self._file(self.path(ep.client, ep.episode))
        fh.write(line)
        fh.flush()  # in the OS's hands: a crash of this process keeps it
        if self.fsync:
            os.fsync(fh.fileno())

    def open(self, ep: OpenEpisode) -> None:
        self.append(ep, {"kind": "open", "client": ep.client, "episode": ep.episode,
                         "experience_id": ep.experience_id, "project": ep.project})

    def remove(self, ep: OpenEpisode) -> None:
        path = self.path(ep.client, ep.episode)
        fh = self._files.pop(path, None)
        if fh is not None:
            fh.close()
        path.unlink(missing_ok=True)

    def close(self) -> None:
        while self._files:
            self._files.popitem()[1].close()

    def load(self) -> list[OpenEpisode]:
        """Every open episode, rebuilt; a torn last line (the call in flight at a crash) is dropped."""
        out = []
        for path in sorted(self.root.glob("*/*.jsonl")):
            ep: OpenEpisode | None = None
            for raw in path.read_text(encoding="utf-8").splitlines():
                try:
                    event = json.loads(raw)
                except ValueError:
                    break  # only the last line can be torn: nothing after it was written
                if event.get("kind") == "open":
                    ep = OpenEpisode(event["client"], event["episode"], event["experience_id"], event["project"])
                elif ep is not None:
                    ep.apply(event)
            if ep is not None:
                out.append(ep)
        return out
