"""Child process for the crash and concurrency tests: appends experiences, acknowledging each.

Usage: python appender.py DB COUNT [STEPS]. Prints `ack <id> <hash>` after each commit returns.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conftest import build_experience
from lle.store import Store


def main() -> None:
    db_path, count = sys.argv[1], int(sys.argv[2])
    n_steps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with Store(db_path) as db:
        for _ in range(count):
            exp = db.append_experience(build_experience(n_steps, observation="x" * 5000))
            print(f"ack {exp.id} {exp.content_hash}", flush=True)


if __name__ == "__main__":
    main()
