"""The static report: the viewer's pages written as files into `runs/RUN/report/`, linked relatively,
so the folder is shared (copied, attached, served by any file server) without `lle view`.

    report/index.html                     the run: curves, tables, verdict, carriers, config
    report/STRATEGY/episodes.html         every episode of that strategy's store
    report/STRATEGY/episodes/EXP.html     one transcript
    report/STRATEGY/carriers.html         every carrier item with its state
    report/STRATEGY/items/ITEM.html       one item with its provenance

Revocation is the one thing the static pages leave out: it writes, so it needs `lle view` (or `lle revoke`).
"""

from __future__ import annotations

from pathlib import Path

from lle.flywheel import report
from lle.viewer import data, lookup, pages


def write_pages(run_id: str, workspace: str | Path | None = None) -> Path:
    """Write every page of the run; returns the index."""
    root = report.report_dir(run_id, workspace)
    root.mkdir(parents=True, exist_ok=True)
    strategies = lookup.strategies_of(run_id, workspace)
    index = pages.run_page(run_id, pages.Links(static=True), workspace)
    (root / "index.html").write_text(index)
    for strategy in strategies:
        src = data.source(run_id, strategy, workspace)
        folder = root / strategy
        (folder / "episodes").mkdir(parents=True, exist_ok=True)
        (folder / "items").mkdir(parents=True, exist_ok=True)
        one_down, two_down = pages.Links(static=True, depth=1), pages.Links(static=True, depth=2)
        (folder / "episodes.html").write_text(pages.episodes_page(src, one_down))
        (folder / "carriers.html").write_text(pages.carriers_page(src, one_down, show_all=True))
        for exp_id in data.all_experience_ids(src):
            (folder / "episodes" / f"{exp_id}.html").write_text(pages.episode_page(src, exp_id, two_down))
        for rows in data.carriers(src, show_all=True).values():
            for row in rows:
                (folder / "items" / f"{row.item.id}.html").write_text(pages.item_page(src, row.item.id, two_down))
    return root / "index.html"
