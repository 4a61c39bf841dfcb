"""The pages, rendered to HTML strings (Jinja2, autoescaped): the same functions serve `lle view` and
the static report (`lle report`), which differ only in how a page links to another (`Links`)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import DictLoader, Environment, select_autoescape
from markupsafe import Markup

from lle.flywheel import report
from lle.flywheel.evaluate import paired_verdicts
from lle.viewer import data, lookup
from lle.viewer.templates import TEMPLATES


@dataclass(frozen=True)
class Links:
    """Where a page links: server routes, or files of the static report relative to the current page."""

    static: bool = False
    depth: int = 0
    """Static pages: folders between the page and the report's root (index.html)."""

    def _up(self) -> str:
        return "../" * self.depth

    def home(self) -> str:
        return "index.html" if self.static and self.depth == 0 else (self._up() + "index.html" if self.static else "/")

    def run(self, run: str) -> str:
        return self._up() + "index.html" if self.static else f"/runs/{run}"

    def episodes(self, run: str, strategy: str) -> str:
        return f"{self._up()}{strategy}/episodes.html" if self.static else f"/runs/{run}/{strategy}/episodes"

    def episode(self, run: str, strategy: str, exp_id: str) -> str:
        return (f"{self._up()}{strategy}/episodes/{exp_id}.html" if self.static
                else f"/runs/{run}/{strategy}/episodes/{exp_id}")

    def carriers(self, run: str, strategy: str, show_all: bool = False) -> str:
        if self.static:
            return f"{self._up()}{strategy}/carriers.html"
        return f"/runs/{run}/{strategy}/carriers" + ("?all=1" if show_all else "")

    def item(self, run: str, strategy: str, item_id: str) -> str:
        return (f"{self._up()}{strategy}/items/{item_id}.html" if self.static
                else f"/runs/{run}/{strategy}/items/{item_id}")

    def record(self, run: str, strategy: str, id_: str) -> str:
        """A link for any id: episodes and items have pages; other ids link nowhere (empty)."""
        if id_.startswith("exp_"):
            return self.episode(run, strategy, id_)
        if id_.startswith("itm_"):
            return self.item(run, strategy, id_)
        return ""

    def revoke(self, run: str, strategy: str, target: str) -> str:
        return "" if self.static else f"/runs/{run}/{strategy}/revoke?target={target}"


_env = Environment(loader=DictLoader(TEMPLATES), autoescape=select_autoescape(default=True, default_for_string=True),
                   trim_blocks=True, lstrip_blocks=True)


def _dash(value: object) -> str:
    return report.cell(value)


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


_env.filters["dash"] = _dash
_env.filters["tojson_pretty"] = _json


def render(name: str, links: Links, **values: Any) -> str:
    return _env.get_template(name).render(links=links, css=Markup(report.CSS), **values)


def runs_page(runs: list[dict[str, object]], workspace_store: bool, links: Links,
              workspace: str | Path | None) -> str:
    """Every run with its overlaid curves (small) and verdict sentences."""
    cards = []
    for run in reversed(runs):  # newest first: the one people just ran
        run_id = str(run["id"])
        svg, sentences = None, []
        try:
            res = report.load_results(run_id, workspace)
            svg = report.curves_svg(res, size=(4.2, 2.6))
            sentences = [v.sentence for v in paired_verdicts(report.report_dir(run_id, workspace).parent, res.config)]
        except Exception as err:
            sentences = [f"could not read this run: {' '.join(str(err).split())}"]
        cards.append({**run, "svg": Markup(svg) if svg else None, "sentences": sentences})
    return render("runs.html", links, runs=cards, workspace_store=workspace_store, title="lle runs")


def run_page(run_id: str, links: Links, workspace: str | Path | None, extra: str = "") -> str:
    res = report.load_results(run_id, workspace)
    folder = report.report_dir(run_id, workspace).parent
    verdicts = [v.row() for v in paired_verdicts(folder, res.config)]
    strategies = lookup.strategies_of(run_id, workspace)
    first = strategies[0] if strategies else "lle"

    def link(strategy: str, id_: str) -> str:
        target = links.record(run_id, "none" if strategy == "none" else strategy or first, id_)
        return f'<a href="{html.escape(target)}">{html.escape(id_)}</a>' if target else html.escape(id_)

    sections = report.run_sections(res, folder, verdicts, link)
    running = not data.finished(run_id, workspace)
    progress = data.run_progress(run_id, workspace) if running else None
    return render("run.html", links, run=run_id, strategies=strategies, sections=Markup(sections),
                  progress=progress, eta=data.eta(run_id, workspace) if running else None, extra=Markup(extra),
                  title=f"run {run_id}")


def episodes_page(src: data.Source, links: Links) -> str:
    rows = data.episodes(src)
    return render("episodes.html", links, src=src, rows=rows, title=f"episodes: {src.run} / {src.strategy}")


def episode_page(src: data.Source, ref: str, links: Links) -> str:
    t = data.transcript(src, ref)
    return render("episode.html", links, src=src, t=t, exp=t.experience, title=f"episode {t.experience.id}")


def carriers_page(src: data.Source, links: Links, show_all: bool = False, message: str = "") -> str:
    groups = data.carriers(src, show_all)
    return render("carriers.html", links, src=src, groups=groups, titles=data.TITLES, show_all=show_all,
                  message=message, title=f"carriers: {src.run} / {src.strategy}")


def item_page(src: data.Source, ref: str, links: Links) -> str:
    p = data.provenance(src, ref)
    return render("item.html", links, src=src, p=p, item=p.item, title=f"{p.item.carrier.value} item {p.item.id}")


def revoke_page(src: data.Source, target: str, links: Links, cascade: Sequence[str], error: str = "") -> str:
    return render("revoke.html", links, src=src, target=target, cascade=list(cascade), error=error,
                  title=f"revoke {target}")


def compare_page(a: str, b: str, links: Links, workspace: str | Path | None) -> str:
    """Two runs side by side: config differences, last-round success, both curves."""
    found = data.compare_runs(a, b, workspace)
    curves = [report.curves_svg(report.load_results(r, workspace), size=(4.6, 2.8)) for r in (a, b)]
    return render("compare.html", links, a=a, b=b, found=found, curves=[Markup(c) if c else None for c in curves],
                  title="compare runs")
