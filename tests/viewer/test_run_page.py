"""The run page as a new user reads it after one round (issue 44): intervals in words, captions naming only the
strategies that ran, and charts whose value axes are not a sliver around one round's value."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lle.viewer.app import create_app

pytestmark = pytest.mark.slow  # shares the toy run of the browser tests

SVG = "{http://www.w3.org/2000/svg}"


def y_ticks(page: str) -> list[list[float]]:
    """Each chart panel's y tick labels, read from the inline SVG matplotlib wrote (text kept as text)."""
    panels = []
    for svg in re.findall(r"<svg\b.*?</svg>", page, re.S):
        root = ET.fromstring(svg)
        for axes in root.iter(f"{SVG}g"):
            if not re.fullmatch(r"axes_\d+", axes.get("id", "")):
                continue
            ticks = [float(t.text.replace("\u2212", "-")) for g in axes.iter(f"{SVG}g")
                     if g.get("id", "").startswith("ytick_") for t in g.iter(f"{SVG}text") if t.text]
            panels.append(ticks)
    return panels


def test_one_round_reads_well(toy_run: tuple[Path, str]) -> None:
    workspace, run = toy_run  # strategies ["lle"], one round, two held-out tasks
    page = TestClient(create_app(workspace, "t")).get(f"/runs/{run}").text

    # Intervals: signed, one decimal, the word "to", a real minus sign; never "-65.80–65.80" or "..".
    assert "\u221265.8 to +65.8" in page
    assert not re.search(r"\d\.\d+\s*(–|\.\.)\s*[-+]?\d", page)
    assert "0.34 to 1.00" in page  # a rate's interval (0 to 1, never negative)

    # Captions and prose name only what ran: none and lle, never raw.
    captions = " ".join(re.findall(r"<figcaption>(.*?)</figcaption>", page, re.S))
    assert "none, lle" in captions
    verdict = re.search(r"<h2>Paired verdict</h2><p>(.*?)</p>", page, re.S)
    assert verdict and "<code>none</code>" in verdict.group(1)
    assert "raw" not in captions + verdict.group(1)

    # Charts: every panel's y axis starts at 0 and spans more than a sliver around one round's value.
    panels = y_ticks(page)
    assert len(panels) >= 3  # success per round, carrier growth, steps per solved task
    for ticks in panels:
        assert ticks and min(ticks) <= 0 and max(ticks) - min(ticks) >= 0.5, ticks


def test_interval_cells() -> None:
    from lle.flywheel.report import cell, points

    assert points([-12.6, 25.8]) == "\u221212.6 to +25.8"
    assert points([-0.04, 3]) == "+0.0 to +3.0"  # no "-0.0"
    assert cell([0.342, 1.0]) == "0.34 to 1.00"
    assert points(None) is None and cell(points(None)) == "—"
