"""An outside world plugin, written from docs/11-writing-a-world.md, found through its entry point.

`demo_counter/` is a package of its own (pyproject with an `lle.plugins` entry point). No build
backend that makes wheels is installed offline here (setuptools without `wheel`), so the test installs
it the way an installer lays it out: the package files plus a `.dist-info` with its `entry_points.txt`,
written from the package's own pyproject, in a folder put on `PYTHONPATH` of child processes. Then
`importlib.metadata.entry_points(group="lle.plugins")` finds it exactly as it finds a pip-installed
plugin, and lle itself is unchanged (the venv is not touched).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from lle.cli.plugins import KINDS_BY_PREFIX

HERE = Path(__file__).parent
PACKAGES = ("demo_counter", "demo_broken", "demo_project")


def install(project: Path, site: Path) -> None:
    """Lay out `project` in `site` as an installer would: its packages and a dist-info with its entry points."""
    meta: dict[str, Any] = tomllib.loads((project / "pyproject.toml").read_text())
    proj = meta["project"]
    for package in meta["tool"]["setuptools"]["packages"]:
        shutil.copytree(project / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"{proj['name'].replace('-', '_')}-{proj['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {proj['name']}\nVersion: {proj['version']}\n")
    lines = []
    for group, eps in proj.get("entry-points", {}).items():
        lines += [f"[{group}]", *(f"{name} = {value}" for name, value in eps.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))
    (info / "INSTALLER").write_text("lle-tests\n")
    (info / "RECORD").write_text("")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    for name in PACKAGES:
        install(HERE / name, folder)
    return folder


def run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=180)


def lle(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(site, "-m", "lle.cli.main", *args)


def test_the_plugin_is_an_entry_point_and_passes_check_family(site: Path) -> None:
    code = ("import json\nfrom importlib.metadata import entry_points\n"
            "from lle.worlds import check_family, open_family\n"
            "eps = {e.name: e.dist.name for e in entry_points(group='lle.plugins') if e.dist is not None}\n"
            "report = check_family(open_family('demo/counter-v1'))\n"
            "print(json.dumps({'dist': eps['demo/counter-v1'], 'passed': report.passed}))")
    result = run(site, "-c", code)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["dist"] == "lle-demo-counter"
    assert {"family-metadata", "family-splits", "family-variety", "family-determinism"} <= set(out["passed"])


def test_lle_plugins_lists_it_and_reports_the_malformed_and_the_mismatched(site: Path) -> None:
    result = lle(site, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert rows["demo/counter-v1"] == {"id": "demo/counter-v1", "kind": "world", "distribution": "lle-demo-counter",
                                       "target": "lle_demo_counter:CounterFamily", "error": None}
    assert rows["toy/keys-v1"]["kind"] == "world" and rows["verifier/rules-v1"]["kind"] == "verifier"
    assert rows["store/sqlite-v1"]["kind"] == "store" and rows["toy/keys-v1"]["distribution"] == "lle"
    malformed = rows["Demo Counter"]
    assert malformed["distribution"] == "lle-demo-broken" and "not a well-formed id" in malformed["error"]
    assert "family/name-vN" in malformed["error"]
    mismatch = rows["demo/renamed-v1"]["error"]
    assert "demo/renamed-v1" in mismatch and "'demo/counter-v1'" in mismatch and "must be equal" in mismatch
    assert "\n" not in mismatch
    assert "Demo Counter" in result.stderr  # the malformed name is also logged when entry points are read


def test_lle_worlds_list_shows_it_from_its_class(site: Path) -> None:
    result = lle(site, "worlds", "list", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert rows["demo/counter-v1"]["tools"] == ["add", "submit"]
    assert rows["demo/counter-v1"]["description"] == "Reach a target number by adding 1..9 at a time."
    assert rows["demo/counter-v1"]["splits"] == {"train": None, "dev": None, "test": None}
    assert "demo/renamed-v1" not in rows and "rejected: demo/renamed-v1" in result.stderr  # said, not hidden


def test_opening_the_mismatched_id_is_a_one_line_error_naming_both(site: Path) -> None:
    result = lle(site, "worlds", "show", "demo/renamed-v1")
    assert result.returncode != 0
    # The other line is the warning about the malformed `Demo Counter`, logged whenever entry points are read.
    lines = [line for line in result.stderr.strip().splitlines() if "Demo Counter" not in line]
    assert len(lines) == 1 and "demo/renamed-v1" in lines[0] and "demo/counter-v1" in lines[0], result.stderr


@pytest.mark.slow
def test_a_world_that_breaks_the_contract_is_one_rejected_line_and_every_other_world_lists(site: Path) -> None:
    table, listed = lle(site, "worlds", "list"), lle(site, "worlds", "list", "--json")
    assert table.returncode == 0 and listed.returncode == 0, table.stderr + listed.stderr
    ids = {r["id"] for r in json.loads(listed.stdout)}
    builtin = {e.name for e in entry_points(group="lle.plugins")
               if e.dist is not None and e.dist.name == "lle" and e.name.split("/")[0] not in KINDS_BY_PREFIX}
    assert "toy/keys-v1" in builtin and builtin | {"demo/counter-v1", "demo/project-v1"} <= ids
    assert "demo/old-v1" not in ids
    for result in (table, listed):
        lines = [line for line in result.stderr.splitlines() if "demo/old-v1" in line]
        assert len(lines) == 1 and lines[0].startswith("rejected: demo/old-v1 (from lle-demo-broken)"), result.stderr
        assert "split_sizes is an instance method" in lines[0] and "@classmethod" in lines[0]
    plugins = lle(site, "plugins", "--json")
    assert plugins.returncode == 0, plugins.stderr
    old = {r["id"]: r for r in json.loads(plugins.stdout)}["demo/old-v1"]
    assert old["distribution"] == "lle-demo-broken" and "breaks the world contract" in old["error"]
    assert "split_sizes is an instance method" in old["error"] and "\n" not in old["error"]
    assert "rejected:" in lle(site, "plugins").stdout


PROJECT_SUITE = """\
max_steps = 20
train = 3
eval = 2

[[worlds]]
id = "demo/project-v1"
projects = ["manor"]
"""


@pytest.mark.slow
def test_a_project_world_of_14_train_tasks_runs_a_suite_drawing_only_seeds_0_to_13(site: Path,
                                                                                   tmp_path: Path) -> None:
    path, workspace = tmp_path / "project.toml", tmp_path / "ws"
    path.write_text(PROJECT_SUITE)
    result = lle(site, "--workspace", str(workspace), "run", "--suite", str(path), "--model", "oracle",
                 "--rounds", "1", "--json")
    assert result.returncode == 0 and "use a seed in" not in result.stderr, result.stderr
    folder = workspace / "runs" / json.loads(result.stdout)["run"]
    drawn = []
    for db in folder.glob("*.db"):
        with sqlite3.connect(db) as conn:
            drawn += [row[0] for row in conn.execute("SELECT small_world_id FROM episodes")]
    train = {int(i.rsplit(":", 1)[1]) for i in drawn if i.startswith("demo/project-v1:manor:train:")}
    assert train == set(range(14))  # every draw below 14; the monitor watches the whole (smaller) split
