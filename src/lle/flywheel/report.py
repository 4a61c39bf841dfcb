"""The run report: `runs/RUN/report/index.html`, one self-contained file (plots inline as SVG, no other
file needed), and `summary.json` beside it. `lle view` shows the same sections live, and `lle report`
adds a page per episode and carrier item (`lle.viewer.static`).

Plots (matplotlib, SVG): held-out success per round with every strategy overlaid in one figure,
95 % Wilson intervals as bands (`none`, which learns nothing, is its round-0 line across every
round); one panel per world when there are several; the curriculum level per family when the run
folder has `curriculum.jsonl`; carrier growth and gate decisions. A panel with nothing to show is
left out, and an empty cell reads "—", never `None`.
"""

from __future__ import annotations

import html
import io
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lle.config import RunConfig
from lle.flywheel.evaluate import RunResults, paired_verdicts, skills_hurt, table
from lle.flywheel.extractor import cost_line
from lle.flywheel.suite import SNAPSHOT
from lle.flywheel.verdict import interval, wilson
from lle.governance.intervals import signed_number
from lle.workspace import resolve

REPORT = "report"
"""The report's folder inside the run folder: the run, its stores and its report travel together."""
CURRICULUM = "curriculum.jsonl"
"""Optional, written by curriculum runs: {"strategy","round","family","level","train_success","train_episodes"}."""
DASH = "—"
COLORS = {"none": "#7f7f7f", "raw": "#ff7f0e", "lle": "#1f77b4"}
STYLES = {"none": "--", "raw": ":", "lle": "-"}
MARKERS = {"none": "s", "raw": "^", "lle": "o"}

CSS = """body{font-family:system-ui,sans-serif;max-width:72em;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td:first-child{white-space:nowrap}
td,th{border:1px solid #ccc;padding:2px 8px;font-size:90%;
vertical-align:top;text-align:left}th{background:#f4f4f4}code,pre,.id{font-family:ui-monospace,monospace;
font-size:90%}pre{background:#f8f8f8;padding:.5em;overflow-x:auto;white-space:pre-wrap}
figure{margin:.5em 0}figcaption{font-size:85%;color:#555}.muted{color:#777}.bad{color:#b00}.good{color:#070}
nav a{margin-right:1em}.step{border-left:3px solid #ccc;padding-left:.8em;margin:1em 0}
.step.denied{border-color:#b00}dt{font-weight:bold;float:left;width:9em;clear:left}dd{margin-left:10em}
.revoked{text-decoration:line-through;color:#999}"""


def report_dir(run_id: str, workspace: str | Path | None = None) -> Path:
    from lle.flywheel.loop import run_folder

    return run_folder(run_id, workspace) / REPORT


reports_dir = report_dir
"""The earlier name, kept for callers."""


def legacy_reports_dir(run_id: str, workspace: str | Path | None = None) -> Path:
    """Where reports were written before they moved into the run folder (`lle runs rm` removes it too)."""
    return resolve(workspace) / "reports" / run_id


def cell(value: object) -> str:
    """A table cell as people read it: nothing known is "—", never `None` or an empty string."""
    if value is None or value == "" or value == []:
        return DASH
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return interval(value[0], value[1], signed=False, digits=2)  # a rate's interval; points: `points`
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def points(value: object) -> object:
    """An interval in points (a difference): "\u221212.6 to +25.8"; anything else as it is."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return interval(value[0], value[1])
    return value


def esc(value: object) -> str:
    return html.escape(cell(value))


def html_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """`columns`: (key, header) pairs; values escaped and shown through `cell`."""
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(row.get(key))}</td>" for key, _ in columns) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


# --- figures --------------------------------------------------------------------------------------------


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prologue or doctype inside the page


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display here, and none needed
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    import matplotlib.pyplot as plt

    return plt


def strategies_of(config: RunConfig) -> list[str]:
    return ["none", *[s for s in config.strategies if s != "none"]]


def _curve(res: RunResults, strategy: str, world: str | None) -> tuple[list[int], list[float], list[float],
                                                                         list[float], list[str]]:
    rounds, rates, lows, highs, labels = [], [], [], [], []
    for round_, total in res.curve(strategy):
        found = total if world is None else res.eval.get(("none" if round_ == 0 else strategy, round_, world))
        if found is None or found.n == 0:
            continue
        low, high = wilson(found.passed, found.n)
        rounds.append(round_)
        rates.append(found.rate)
        lows.append(low)
        highs.append(high)
        labels.append(f"{found.passed}/{found.n}")
    if strategy == "none" and rounds:  # nothing is learned: the baseline holds every round
        rounds = list(range(0, res.config.rounds + 1))
        n = len(rounds)
        rates, lows, highs, labels = rates * n, lows * n, highs * n, labels * n
    return rounds, rates, lows, highs, labels


def _rounds_axis(ax: Any, rounds: Sequence[float]) -> None:
    """One round (or one x) only: half a round either side, not matplotlib's sliver around it."""
    if rounds and max(rounds) - min(rounds) < 0.5:
        middle = round((max(rounds) + min(rounds)) / 2)
        ax.set_xlim(middle - 0.6, middle + 0.6)


def _value_axis(ax: Any, values: Sequence[float]) -> None:
    """Counts, steps, levels: from 0 to a little above the largest, so one round (a constant) is not a
    sliver of a few hundredths around its value."""
    top = max(values, default=0.0)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)


def _label_single(ax: Any, xs: Sequence[float], ys: Sequence[float], text: str) -> None:
    """A series of one point: its value written beside it, so the dot reads on its own."""
    if len(xs) == 1:
        ax.annotate(text.format(ys[0]), (xs[0], ys[0]), textcoords="offset points", xytext=(5, 5), fontsize=7)


def _draw_curves(ax: Any, res: RunResults, world: str | None, legend: bool) -> bool:
    from matplotlib.ticker import MaxNLocator

    names = strategies_of(res.config)
    drawn = False
    every: list[float] = []
    for i, strategy in enumerate(names):
        rounds, rates, lows, highs, _ = _curve(res, strategy, world)
        if not rounds:
            continue
        drawn = True
        # A small sideways shift per strategy: equal rates (the oracle solves all) do not hide each other.
        shift = (i - (len(names) - 1) / 2) * 0.04
        xs = [r + shift for r in rounds]
        color = COLORS.get(strategy)
        ax.fill_between(xs, lows, highs, color=color, alpha=0.15, linewidth=0)
        ax.plot(xs, rates, STYLES.get(strategy, "-"), marker=MARKERS.get(strategy, "o"), color=color, label=strategy)
        _label_single(ax, xs, rates, f"{{:.2f}} {strategy}")
        every.extend(rounds)
    ax.set_ylim(-0.03, 1.03)  # a rate: always 0 to 1, whatever the rounds
    _rounds_axis(ax, every)
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("held-out success")
    ax.set_title(world or "all worlds")
    ax.grid(alpha=0.3)
    if legend and drawn:
        ax.legend(loc="lower right", fontsize=8)
    return drawn


def curves_svg(res: RunResults, size: tuple[float, float] = (6.0, 3.6)) -> str | None:
    """Held-out success per round, every strategy in one figure, Wilson bands; None when nothing was evaluated."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=size)
    if not _draw_curves(ax, res, None, legend=True):
        plt.close(fig)
        return None
    return _svg(fig)


def worlds_svg(res: RunResults) -> str | None:
    """One small panel per world (only when there are several: with one, it is the figure above)."""
    worlds = res.worlds()
    if len(worlds) < 2:
        return None
    plt = _pyplot()
    cols = min(3, len(worlds))
    rows = (len(worlds) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.6 * rows), squeeze=False)
    for n, ax in enumerate(axes.flat):
        if n < len(worlds):
            _draw_curves(ax, res, worlds[n], legend=n == 0)
        else:
            ax.remove()  # no empty panel
    return _svg(fig)


def read_curriculum(folder: Path) -> list[dict[str, Any]]:
    path = folder / CURRICULUM
    if not path.exists():
        return []
    rows = []
    for text in path.read_text().splitlines():
        try:
            row = json.loads(text)
        except ValueError:
            continue  # a line being written while we read: the next report has it
        if isinstance(row, dict) and {"strategy", "round", "family", "level"} <= set(row):
            rows.append(row)
    return rows


def curriculum_svg(folder: Path) -> str | None:
    """The curriculum level per family per round (one line per strategy and family); None without the file."""
    rows = read_curriculum(folder)
    if not rows:
        return None
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    lines: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for row in rows:
        lines[(str(row["strategy"]), str(row["family"]))][int(row["round"])] = float(row["level"])
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    for (strategy, family), levels in sorted(lines.items()):
        rounds = sorted(levels)
        ax.plot(rounds, [levels[r] for r in rounds], STYLES.get(strategy, "-"), marker="o",
                label=f"{strategy}: {family}")
        _label_single(ax, rounds, [levels[r] for r in rounds], "{:g}")
    _rounds_axis(ax, [r for levels in lines.values() for r in levels])
    top = max((v for levels in lines.values() for v in levels.values()), default=0.0)
    ax.set_ylim(-0.2, top + 1)  # levels start at 0
    ax.set_xlabel("round")
    ax.set_ylabel("curriculum level")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("curriculum level per family")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _svg(fig)


def growth_svg(res: RunResults) -> str | None:
    """Carriers admitted per round (cumulative) and held-out steps per solved task; only the panels with data."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    has_growth = any(any(counts for counts in per_round.values()) for per_round in res.growth.values())
    steps = {s: [(r, c.steps_solved / c.passed) for r, c in res.curve(s) if c.passed]
             for s in strategies_of(res.config)}
    has_steps = any(steps.values())
    panels = [p for p, keep in (("growth", has_growth), ("steps", has_steps)) if keep]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.2), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=True):
        xs_all: list[float] = []
        ys_all: list[float] = []
        if panel == "growth":
            for strategy, per_round in res.growth.items():
                for carrier in sorted({c for counts in per_round.values() for c in counts}):
                    rounds = sorted(per_round)
                    counts = [per_round[r].get(carrier, 0) for r in rounds]
                    ax.plot(rounds, counts, STYLES.get(strategy, "-"), marker="o", label=f"{strategy}: {carrier}")
                    _label_single(ax, rounds, counts, "{:g}")
                    xs_all += rounds
                    ys_all += counts
            ax.set_title("carrier items admitted (skills: activated), cumulative", fontsize=9)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        else:
            for strategy, found in steps.items():
                if found:
                    xs, ys = [r for r, _ in found], [v for _, v in found]
                    ax.plot(xs, ys, STYLES.get(strategy, "-"), marker=MARKERS.get(strategy, "o"),
                            color=COLORS.get(strategy), label=strategy)
                    _label_single(ax, xs, ys, "{:.1f}")
                    xs_all += xs
                    ys_all += ys
            ax.set_title("held-out steps per solved task", fontsize=9)
        _value_axis(ax, ys_all)
        _rounds_axis(ax, xs_all)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _svg(fig)


# --- the page -------------------------------------------------------------------------------------------

RESULT_COLUMNS = [("world", "world"), ("strategy", "strategy"), ("round0", "round 0 solved"),
                  ("last", "last round solved"), ("last_rate", "rate"), ("ci95", "95 % interval"),
                  ("steps_per_solved", "steps / solved"), ("tokens_per_solved", "tokens / solved"),
                  ("time_capped", "stopped by time cap")]
VERDICT_COLUMNS = [("strategy", "strategy"), ("baseline", "against"), ("n", "tasks"), ("solved", "solved"),
                   ("difference_points", "difference (points)"), ("b", "b: only strategy"),
                   ("c", "c: only baseline"), ("p_value", "p (McNemar)"), ("ci95_points", "95 % interval (points)"),
                   ("time_capped", "time-capped")]


def verdict_html(rows: list[dict[str, object]]) -> str:
    """The paired verdict: a small table and its sentences (lle.flywheel.verdict says how it is computed)."""
    if not rows:
        return ""
    sentences = "".join(f"<li>{html.escape(str(row['sentence']))}</li>" for row in rows)
    baselines = " and ".join(f"<code>{html.escape(b)}</code>" for b in dict.fromkeys(str(r["baseline"]) for r in rows))
    rows = [{**row, "ci95_points": points(row.get("ci95_points"))} for row in rows]
    return (f"<h2>Paired verdict</h2><p>Last round against {baselines} on the same held-out "
            "tasks, task by task: b = solved only by the strategy, c = only by the baseline; exact McNemar p-value; "
            "Newcombe's paired 95 % interval of the difference, in points.</p>"
            f"{html_table(rows, VERDICT_COLUMNS)}<ul>{sentences}</ul>")


def figure(svg: str | None, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>" if svg else ""


def run_sections(res: RunResults, folder: Path, verdicts: list[dict[str, object]],
                 link: Callable[[str, str], str] | None = None) -> str:
    """The body of the run page, shared by the report file and `lle view`: curves, table, verdict, growth,
    curriculum, carriers, revocations, config. `link(strategy, id)` makes ids links (None: plain text)."""
    rows = table(res)
    ran = [s for s in strategies_of(res.config) if _curve(res, s, None)[0]]  # what was evaluated, not configured
    capped = sum(int(str(r["time_capped"])) for r in rows if r["world"] == "all")
    capped_note = (f"<p>Stopped by the time cap: {capped} held-out episodes (a safety cap on wall-clock time, not a "
                   "failure of the agent; left out of the rates above and of the verdict).</p>") if capped else ""
    parts = [
        figure(curves_svg(res), f"Held-out success per round: {', '.join(ran)} (bands: 95 % Wilson intervals"
                                + ("; none learns nothing, so its round-0 result holds every round)."
                                   if "none" in ran else ").")),
        "<h2>Held-out success</h2><p>Dev small worlds: round 0 (before any experience) against the last round. "
        "Success means the world's own anchor passed; unknown counts as not solved.</p>",
        html_table(rows, RESULT_COLUMNS), capped_note, verdict_html(verdicts),
        figure(worlds_svg(res), "Held-out success per round and world."),
        figure(curriculum_svg(folder), "Curriculum level per family and round (from curriculum.jsonl)."),
        figure(growth_svg(res), "Carrier growth per round, and held-out steps per solved task."),
        _carriers_html(res), _skills_html(res), _adapters_html(res), _revoked_html(res, link), _poison_html(res),
        f"<h2>Config</h2><pre>{html.escape(json.dumps(res.config.model_dump(mode='json'), indent=2))}</pre>",
    ]
    return "\n".join(p for p in parts if p)


def _carriers_html(res: RunResults) -> str:
    if not res.carriers and not res.gates:
        return ""
    names = sorted({c for counts in res.carriers.values() for c in counts})
    rows = [{"strategy": s, **counts} for s, counts in res.carriers.items()]
    active = html_table(rows, [("strategy", "strategy"), *[(n, n) for n in names]]) if names else "<p>None.</p>"
    decisions = sorted({d for counts in res.gates.values() for d in counts})
    gate_rows = [{"decision": d, **{s: res.gates[s].get(d, 0) for s in res.gates}} for d in decisions]
    gates = html_table(gate_rows, [("decision", "gate: decision"), *[(s, s) for s in res.gates]]) if decisions else ""
    return f"<h2>Active carrier items after the last round</h2>{active}<h2>Gate decisions</h2>{gates}"


SKILL_COLUMNS = [("skill", "skill"), ("version", "version"), ("state", "state"), ("source", "source"),
                 ("with", "offered: solved"), ("without", "withheld: solved"),
                 ("difference_points", "difference (points)"), ("ci95_points", "95 % interval (points)"),
                 ("judged", "judged")]


def skills_summary(rows: Sequence[dict[str, Any]]) -> str:
    """The share of negative transfer, "skills that hurt: K of N (x %)", of the skills judged (enough episodes in
    both arms, or retired for their use)."""
    hurt, judged = skills_hurt(rows)
    return f"skills that hurt: {hurt} of {judged} ({f'{100 * hurt / judged:.0f} %' if judged else DASH})"


def _skills_html(res: RunResults) -> str:
    if not res.skills:
        return ""
    parts = ["<h2>Skills and their measured use</h2><p>Each skill that was active: its family's train episodes "
             f"offered the library's skills against the {100 * res.config.skills_withhold:g} % withheld them (chosen "
             "by seed), since its activation; the difference in success with Newcombe's 95 % interval, in points. "
             "A skill with too few episodes in either arm is not judged; one whose interval lies at or below 0 is "
             "retired. Hurt: judged, and worse with it (negative transfer).</p>"]
    for strategy, rows in res.skills.items():
        shown = [{**r, "ci95_points": points(r.get("ci95_points")), "judged": "yes" if r.get("decided") else "no",
                  "difference_points": signed_number(float(str(r.get("difference_points", 0.0)))),
                  "state": f"{r['state']} (for its use)" if r.get("retired_for_use") else r["state"]} for r in rows]
        head = f"<h3>{html.escape(strategy)}</h3>" if len(res.skills) > 1 else ""
        body = html_table(shown, SKILL_COLUMNS) if rows else "<p>No skill was active.</p>"
        cost = f"<p>{html.escape(cost_line(res.extractor[strategy]))}</p>" if strategy in res.extractor else ""
        parts.append(f"{head}<p>{html.escape(skills_summary(rows))}</p>{cost}{body}")
    return "".join(parts)


ADAPTER_COLUMNS = [("round", "round"), ("adapter", "adapter"), ("method", "method"), ("rows", "rows"),
                   ("steps", "steps"), ("candidate_solved", "gate replay: adapter"),
                   ("served_solved", "gate replay: served"), ("state", "state now"), ("gate", "gate")]


def _adapters_html(res: RunResults) -> str:
    if res.config.weights_min_rows is None:
        return ""
    body = html_table(res.adapters, ADAPTER_COLUMNS) if res.adapters else "<p>No round trained an adapter.</p>"
    return ("<h2>Weights: adapters per round</h2><p>A LoRA adapter trained after a round on lle's verified rows, "
            "replayed against the policy served then on dev tasks apart from the verdict's; an active adapter "
            "serves every later lle round, so its effect is in the held-out curve above.</p>" + body)


def _revoked_html(res: RunResults, link: Callable[[str, str], str] | None) -> str:
    rows = [(strategy, r) for strategy, revocations in res.revocations.items() for r in revocations]
    if not rows:
        return "<h2>Revoked</h2><p>Nothing.</p>"
    body = "".join(
        f"<tr><td>{html.escape(s)}</td><td class='id'>{link(s, r.target) if link else html.escape(r.target)}</td>"
        f"<td>{html.escape(r.reason)}</td><td>{html.escape(r.author)}</td><td>{r.at:%Y-%m-%d %H:%M}</td>"
        f"<td>{len(r.cascade)}</td></tr>" for s, r in rows)
    return ("<h2>Revoked</h2><table><tr><th>strategy</th><th>target</th><th>reason</th><th>who</th><th>when</th>"
            f"<th>derived records revoked with it</th></tr>{body}</table>")


def _poison_html(res: RunResults) -> str:
    if res.config.scenario != "poison":
        return ""
    keys = sorted({k for counts in res.poison.values() for k in counts})
    rows = [{"key": k, **{s: res.poison[s].get(k, 0) for s in res.poison}} for k in keys]
    return ("<h2>Poison scenario: what reached each carrier</h2>"
            + html_table(rows, [("key", "carrier: kind"), *[(s, s) for s in res.poison]]))


def page(title: str, body: str, nav: str = "") -> str:
    """A whole page: inline CSS, nothing loaded from anywhere."""
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>{nav}<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def write_report(res: RunResults, workspace: str | Path | None = None) -> Path:
    from lle.flywheel.loop import run_folder

    run = run_folder(res.config.id, workspace)
    folder = report_dir(res.config.id, workspace)
    folder.mkdir(parents=True, exist_ok=True)
    rows = table(res)
    verdicts = [v.row() for v in paired_verdicts(run, res.config)]
    suite = json.loads((run / SNAPSHOT).read_text()) if (run / SNAPSHOT).exists() else None
    (folder / "summary.json").write_text(json.dumps({"config": res.config.model_dump(mode="json"), "table": rows,
                                                     "verdict": verdicts, "suite": suite,
                                                     "carriers": res.carriers, "gates": res.gates,
                                                     "revoked": res.revoked, "growth": res.growth,
                                                     "curriculum": read_curriculum(run),
                                                     "poison": res.poison, "adapters": res.adapters,
                                                     "skills": res.skills, "extractor": res.extractor,
                                                     "skills_hurt": {s: dict(zip(("hurt", "judged"), skills_hurt(r),
                                                                                 strict=True))
                                                                     for s, r in res.skills.items()}}, indent=2))
    body = run_sections(res, run, verdicts)
    if suite:
        body += "<h2>Suite</h2><pre>" + html.escape(json.dumps(suite, indent=2)) + "</pre>"
    (folder / "index.html").write_text(page(f"lle run {res.config.id}", body))
    return folder / "index.html"


def load_results(run_id: str, workspace: str | Path | None = None) -> RunResults:
    from lle.flywheel.evaluate import results
    from lle.flywheel.loop import load_config, run_folder

    config: RunConfig = load_config(run_id, workspace)
    return results(run_folder(run_id, workspace), config)
