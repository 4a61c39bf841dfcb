"""The viewer without a browser: every page answers, writes need the token and a confirmation, bad ids are
one-line error pages, and the static report links only files of its own folder."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lle.flywheel import loop
from lle.store import Store
from lle.viewer.app import create_app
from lle.viewer.static import write_pages

pytestmark = pytest.mark.slow  # shares the toy run of the browser tests


@pytest.fixture
def copy(toy_run: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    """The run in a copy: revocations here do not change what the browser tests see."""
    workspace, run = toy_run
    shutil.copytree(workspace, tmp_path / "ws")
    return tmp_path / "ws", run


def test_pages_answer_and_prefixes_resolve(toy_run: tuple[Path, str]) -> None:
    workspace, run = toy_run
    client = TestClient(create_app(workspace, "t"))
    assert client.get("/").status_code == 200
    latest = client.get("/runs/latest", follow_redirects=False)
    assert latest.status_code == 307 and latest.headers["location"] == f"/runs/{run}"
    episodes = client.get(f"/runs/{run}/lle/episodes").text
    ids = sorted(set(re.findall(r"episodes/(exp_\w+)", episodes)))
    # Ids minted in one millisecond share most characters: the shortest prefix of the first no other id has.
    prefix = next(ids[0][:n] for n in range(12, 31) if sum(i.startswith(ids[0][:n]) for i in ids) == 1)
    assert ids[0] in client.get(f"/runs/{run}/lle/episodes/{prefix}").text  # a prefix is enough
    missing = client.get(f"/runs/{run}/lle/items/itm_NOPE")
    assert missing.status_code == 404 and "no carrier item with id" in missing.text
    assert client.get(f"/runs/{run}/raw/carriers").status_code == 400  # this run has no raw store
    compared = client.get("/compare", params={"a": run[:10], "b": "latest"})
    assert compared.status_code == 200 and "The same (but for the id)" in compared.text


def test_a_revocation_needs_the_token_the_confirmation_and_a_reason(copy: tuple[Path, str]) -> None:
    workspace, run = copy
    client = TestClient(create_app(workspace, "secret"))
    carriers = client.get(f"/runs/{run}/lle/carriers").text
    item = re.findall(r"items/(itm_\w+)", carriers)[0]
    preview = client.get(f"/runs/{run}/lle/revoke", params={"target": item})
    assert preview.status_code == 200 and "Dry run" in preview.text
    form = {"target": item, "reason": "wrong", "author": "me", "token": "secret", "confirm": "yes"}
    assert client.post(f"/runs/{run}/lle/revoke", data={**form, "token": "guess"}).status_code == 403
    assert client.post(f"/runs/{run}/lle/revoke", data={**form, "confirm": ""}).status_code == 400
    assert client.post(f"/runs/{run}/lle/revoke", data={**form, "reason": " "}).status_code == 400
    with Store(loop.strategy_db(loop.run_folder(run, workspace), "lle")) as db:
        assert db.list_revocations() == []  # nothing written by the refused attempts
    done = client.post(f"/runs/{run}/lle/revoke", data=form, follow_redirects=False)
    assert done.status_code == 303
    with Store(loop.strategy_db(loop.run_folder(run, workspace), "lle")) as db:
        assert [r.target for r in db.list_revocations()] == [item]


def test_the_static_report_is_self_contained(copy: tuple[Path, str]) -> None:
    workspace, run = copy
    (loop.run_folder(run, workspace) / "curriculum.jsonl").write_text(
        '{"strategy":"lle","round":0,"family":"toy","level":1,"train_success":0.5,"train_episodes":4}\n'
        '{"strategy":"lle","round":1,"family":"toy","level":2,"train_success":1.0,"train_episodes":4}\n')
    index = write_pages(run, workspace)
    root = index.parent
    pages = list(root.rglob("*.html"))
    assert len(pages) > 10
    for page in pages:
        text = page.read_text()
        assert ">None<" not in text and "<script" not in text and "<link" not in text
        assert not re.findall(r'(?:src|href)="(?:https?:)?//', text)  # nothing loaded from elsewhere
        for ref in re.findall(r'href="([^"#]+)"', text):
            assert (page.parent / ref).resolve().is_file(), (page, ref)  # every link is a file of the report
    assert "curriculum level" in index.read_text()


def test_the_workspace_store_and_a_copied_placeholder(tmp_path: Path) -> None:
    from factories import build_experience
    from lle.core import ActionRequest

    exp = build_experience(observation="[refunded] order 54")
    step = exp.steps[0].model_copy(update={"request": ActionRequest(tool="run_query", args={"sql": "SELECT 0"},
                                                                    expect="What you predict it will return")})
    exp = exp.model_copy(update={"steps": [step, *exp.steps[1:]]}).sealed()
    with Store(tmp_path / "lle.db") as db:
        db.append_experience(exp)
    client = TestClient(create_app(tmp_path, "t"))
    assert "/runs/workspace/main/episodes" in client.get("/").text
    page = client.get(f"/runs/workspace/main/episodes/{exp.id}").text
    assert "copies the prompt's placeholder: not a prediction" in page and "prompt not stored" in page
    assert "[refunded] order 54" in page and "sql/shop-v1:train:0" in page


def test_a_run_not_finished_shows_its_progress(copy: tuple[Path, str]) -> None:
    workspace, run = copy  # 2 held-out tasks at round 0, 4 train and 2 held-out in round 1, 2 watched at both
    (loop.run_folder(run, workspace) / "finished_at").unlink()  # as while it runs, or after a kill
    page = TestClient(create_app(workspace, "t")).get(f"/runs/{run}").text
    assert "In progress" in page and "12 of 12 planned episodes" in page and f"lle run --resume {run}" in page
