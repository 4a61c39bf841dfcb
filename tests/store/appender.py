"""Child process for the crash and concurrency tests: appends experiences, acknowledging each.

Usage: python appender.py DB COUNT [STEPS] [BATCH] [OBSERVATION_CHARS]. DB is a path or a
postgresql:// URL. Prints `ack <id> <hash>` for each experience once the commit holding it returned;
BATCH experiences share one transaction (`append_experiences`).
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
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    chars = int(sys.argv[5]) if len(sys.argv) > 5 else 5000
    with Store(db_path) as db:
        done = 0
        while done < count:
            size = min(batch, count - done)
            stored = db.append_experiences([build_experience(n_steps, observation="x" * chars) for _ in range(size)])
            print("\n".join(f"ack {e.id} {e.content_hash}" for e in stored), flush=True)
            done += size


if __name__ == "__main__":
    main()
