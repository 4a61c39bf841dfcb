"""Child process of the episode crash test: a batch of toy episodes on 2 workers, acks to a log.

Usage: episode_crash_child.py DB ACK_LOG N WORKERS. Each acknowledged step is appended to ACK_LOG as
`exp_id index` right after the store committed it (os.write on an O_APPEND fd: a SIGKILL cannot
lose a line that was written, and cannot write a line for a step that was not committed).
"""

from __future__ import annotations

import os
import sys

from lle.core import Split, Step
from lle.runtime.parallel import run_many
from lle.store import Store
from lle.worlds.toy import KeysFamily, oracle_policy


def main() -> None:
    db_path, ack_path, n, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def ack(episode_id: str, step: Step) -> None:
        os.write(fd, f"{episode_id} {step.index}\n".encode())

    small_worlds = KeysFamily().small_worlds(Split.train, n)
    with Store(db_path) as db:
        done = run_many(small_worlds, oracle_policy, store=db, workers=workers, batch="crash", on_commit=ack,
                        record_timings=False)
    print(f"finished {len(done)}", flush=True)


if __name__ == "__main__":
    main()
