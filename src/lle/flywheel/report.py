"""The run report: `.lle/reports/RUN/index.html` with its plots beside it, nothing from elsewhere.

Plots (matplotlib, PNG): held-out success per round for each strategy and world with Wilson
intervals; carrier growth per round and steps per solved task; active carriers and gate decisions.
The HTML links only files in its own folder, so the folder can be copied or served as it is.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from lle.core import RunConfig
from lle.flywheel.evaluate import RunResults, paired_verdicts, table
from lle.flywheel.suite import SNAPSHOT
from lle.flywheel.verdict import wilson
from lle.workspace import resolve


def reports_dir(run_id: str, workspace: str | Path | None = None) -> Path:
    return resolve(workspace) / "reports" / run_id


def _plots(res: RunResults, folder: Path) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")  # no display here, and none needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    made: list[tuple[str, str]] = []
    strategies = ["none", *[s for s in res.config.strategies if s != "none"]]
    for world in [*res.worlds(), None]:
        fig, ax = plt.subplots(figsize=(5.5, 3.4))
        for strategy in strategies:
            rounds, rates, lows, highs = [], [], [], []
            for round_, total in res.curve(strategy):
                cell = total if world is None else res.eval.get(("none" if round_ == 0 else strategy, round_, world))
                if cell is None or cell.n == 0:
                    continue
                low, high = wilson(cell.passed, cell.n)
                rounds.append(round_)
                rates.append(cell.rate)
                lows.append(max(0.0, cell.rate - low))  # float rounding can put the bound a hair past the rate
                highs.append(max(0.0, high - cell.rate))
            if strategy == "none" and rounds:  # nothing is learned: the baseline holds every round
                rounds = list(range(0, res.config.rounds + 1))
                rates, lows, highs = rates * len(rounds), lows * len(rounds), highs * len(rounds)
            ax.errorbar(rounds, rates, yerr=[lows, highs], marker="o", capsize=3, label=strategy)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("held-out success")
        ax.set_title(world or "all worlds")
        ax.legend()
        name = f"success-{(world or 'all').replace('/', '_')}.png"
        fig.tight_layout()
        fig.savefig(folder / name, dpi=90)
        plt.close(fig)
        made.append((name, f"Held-out success per round: {world or 'all worlds'} (95 % Wilson intervals)"))
    if any(res.growth.values()):
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
        for strategy, per_round in res.growth.items():
            for carrier in sorted({c for counts in per_round.values() for c in counts}):
                rounds = sorted(per_round)
                left.plot(rounds, [per_round[r].get(carrier, 0) for r in rounds], marker="o",
                          label=f"{strategy}: {carrier}")
        left.set_xlabel("round")
        left.set_title("carrier items admitted (skills: activated), cumulative")
        left.legend(fontsize=7)
        for strategy in strategies:
            points = [(r, c.steps_solved / c.passed) for r, c in res.curve(strategy) if c.passed]
            if points:
                right.plot([r for r, _ in points], [v for _, v in points], marker="o", label=strategy)
        right.set_xlabel("round")
        for ax in (left, right):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        right.set_title("held-out steps per solved task" if right.lines else "no held-out task solved")
        if right.lines:
            right.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(folder / "growth.png", dpi=90)
        plt.close(fig)
        made.append(("growth.png", "Carrier growth per round, and steps per solved held-out task"))
    if res.carriers or res.gates:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
        names = sorted({c for counts in res.carriers.values() for c in counts})
        for i, strategy in enumerate(res.carriers):
            left.bar([n + i * 0.4 for n in range(len(names))], [res.carriers[strategy].get(c, 0) for c in names],
                     width=0.4, label=strategy)
        left.set_xticks(range(len(names)), names)
        left.set_title("active carrier items after the last round")
        left.legend()
        decisions = sorted({d for counts in res.gates.values() for d in counts})
        for i, strategy in enumerate(res.gates):
            right.barh([n + i * 0.4 for n in range(len(decisions))], [res.gates[strategy].get(d, 0) for d in decisions],
                       height=0.4, label=strategy)
        right.set_yticks(range(len(decisions)), decisions, fontsize=7)
        right.set_title("gate decisions (gate:op)")
        fig.tight_layout()
        fig.savefig(folder / "carriers.png", dpi=90)
        plt.close(fig)
        made.append(("carriers.png", "Carrier growth and gate decisions"))
    return made


def write_report(res: RunResults, workspace: str | Path | None = None) -> Path:
    folder = reports_dir(res.config.id, workspace)
    folder.mkdir(parents=True, exist_ok=True)
    plots = _plots(res, folder)
    rows = table(res)
    from lle.flywheel.loop import run_folder

    run = run_folder(res.config.id, workspace)
    verdicts = [v.row() for v in paired_verdicts(run, res.config)]
    suite = json.loads((run / SNAPSHOT).read_text()) if (run / SNAPSHOT).exists() else None
    (folder / "summary.json").write_text(json.dumps({"config": res.config.model_dump(mode="json"), "table": rows,
                                                     "verdict": verdicts, "suite": suite,
                                                     "carriers": res.carriers, "gates": res.gates,
                                                     "revoked": res.revoked, "growth": res.growth,
                                                     "poison": res.poison}, indent=2))
    head = "".join(f"<th>{html.escape(k)}</th>" for k in rows[0]) if rows else ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row.values()) + "</tr>"
                   for row in rows)
    figures = "".join(f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
                      f"<figcaption>{html.escape(caption)}</figcaption></figure>" for name, caption in plots)
    revoked = "".join(
        f"<tr><td>{html.escape(strategy)}</td><td>{html.escape(r.target)}</td><td>{html.escape(r.reason)}</td>"
        f"<td>{html.escape(r.author)}</td><td>{r.at:%Y-%m-%d %H:%M}</td><td>{len(r.cascade)}</td></tr>"
        for strategy, revocations in res.revocations.items() for r in revocations)
    revoked = ("<h2>Revoked</h2><table><tr><th>strategy</th><th>target</th><th>reason</th><th>who</th><th>when</th>"
               f"<th>items with it</th></tr>{revoked}</table>") if revoked else "<h2>Revoked</h2><p>Nothing.</p>"
    poison = ""
    if res.config.scenario == "poison":
        poison = "<h2>Poison scenario: what reached each carrier</h2><pre>" + html.escape(
            json.dumps(res.poison, indent=2)) + "</pre>"
    config = html.escape(json.dumps(res.config.model_dump(mode="json"), indent=2))
    capped = sum(int(str(r["time_capped"])) for r in rows if r["world"] == "all")
    capped_note = (f"<p>Stopped by the time cap: {capped} held-out episodes (a safety cap on wall-clock time, not a "
                   "failure of the agent; left out of the rates above and of the verdict).</p>") if capped else ""
    verdict = _verdict_html(verdicts)
    suite_html = ("<h2>Suite</h2><pre>" + html.escape(json.dumps(suite, indent=2)) + "</pre>") if suite else ""
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>lle run {html.escape(res.config.id)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:90%}}figure{{display:inline-block;margin:0.5em}}</style>
</head><body>
<h1>lle run {html.escape(res.config.id)}</h1>
<p>Held-out (dev) success: round 0 (before any experience) against the last round, per world and strategy.
Success means the world's own anchor passed; unknown counts as not solved.</p>
<table><tr>{head}</tr>{body}</table>
{capped_note}
{verdict}
{figures}
<h2>Carriers and gates</h2><pre>{html.escape(json.dumps({"active": res.carriers, "revocations": res.revoked,
                                                         "decisions": res.gates}, indent=2))}</pre>
{revoked}
{poison}
{suite_html}
<h2>Config</h2><pre>{config}</pre>
</body></html>
"""
    (folder / "index.html").write_text(page)
    return folder / "index.html"


def _verdict_html(rows: list[dict[str, object]]) -> str:
    """The paired verdict: a small table and its sentences (lle.flywheel.verdict says how it is computed)."""
    if not rows:
        return ""
    names = ("strategy", "baseline", "n", "solved", "difference_points", "b", "c", "p_value", "ci95_points",
             "time_capped")
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(row[n]))}</td>" for n in names) + "</tr>" for row in rows)
    sentences = "".join(f"<li>{html.escape(str(row['sentence']))}</li>" for row in rows)
    return ("<h2>Paired verdict</h2><p>Last round against <code>none</code> and <code>raw</code> on the same held-out "
            "tasks, task by task: b = solved only by the strategy, c = only by the baseline; exact McNemar p-value; "
            "Newcombe's paired 95 % interval of the difference, in points.</p>"
            f"<table><tr>{head}</tr>{body}</table><ul>{sentences}</ul>")


def load_results(run_id: str, workspace: str | Path | None = None) -> RunResults:
    from lle.flywheel.evaluate import results
    from lle.flywheel.loop import load_config, run_folder

    config: RunConfig = load_config(run_id, workspace)
    return results(run_folder(run_id, workspace), config)
