"""`lle view` in a real browser (headless Chromium through Playwright) over a finished toy run: the runs page,
an episode's transcript with its evidence, a skill with its steps and provenance, and revoking a memory
(preview, token, confirmation) until it is gone from the active view.

Screenshots of each page go to $LLE_VIEWER_SCREENSHOTS when set (the docs' are made with
`LLE_VIEWER_SCREENSHOTS=docs/img pytest tests/viewer`), else to the test's temporary folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from viewer.served_app import Served

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium); "
                                                          "`playwright install` cannot download here")]

if CHROMIUM is not None:
    from playwright.sync_api import Browser, Page, expect, sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("LLE_VIEWER_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_runs_and_a_run_page(served: Served, page: Page, shots: Path) -> None:
    page.goto(served.url + "/")
    expect(page.locator(f"a:text('{served.run}')")).to_be_visible()
    expect(page.locator("svg").first).to_be_visible()  # the overlaid learning curves
    page.screenshot(path=shots / "viewer-runs.png")
    page.click(f"a:text('{served.run}')")
    expect(page.locator("h2:text('Held-out success')")).to_be_visible()
    assert "None" not in page.locator("table").first.inner_text()
    page.screenshot(path=shots / "viewer-run.png", full_page=True)


def test_an_episode_shows_its_steps_and_evidence(served: Served, page: Page, shots: Path) -> None:
    page.goto(f"{served.url}/runs/{served.run}/lle/episodes")
    page.locator("tr", has_text="train").locator("a").first.click()
    expect(page.locator("h3").first).to_contain_text("step 0")
    page.locator("summary:text('what the model saw')").first.click()  # the prompt, or why it is not there
    expect(page.locator(".step").first).to_contain_text("prompt")
    expect(page.locator(".step").first).to_contain_text("requested")
    evidence = page.locator("table.evidence tr")
    assert evidence.count() > 1
    expect(page.locator("table.evidence")).to_contain_text("state")  # the world's own hard anchor
    page.screenshot(path=shots / "viewer-episode.png", full_page=True)


def test_a_skill_with_its_steps_and_provenance(served: Served, page: Page, shots: Path) -> None:
    page.goto(f"{served.url}/runs/{served.run}/lle/carriers")
    page.locator("table.carrier-skills a").first.click()
    expect(page.locator("ol.skill-steps li").first).to_be_visible()
    provenance = page.locator("table.provenance")
    expect(provenance).to_contain_text("exp_")  # the episodes it was mined from
    expect(provenance).to_contain_text("upd_")  # the update, with its gate
    expect(provenance).to_contain_text("skills:")
    page.screenshot(path=shots / "viewer-skill.png", full_page=True)


def test_revoking_a_memory_needs_the_token_and_a_confirmation(served: Served, page: Page, shots: Path) -> None:
    page.goto(f"{served.url}/runs/{served.run}/lle/carriers")
    page.screenshot(path=shots / "viewer-carriers.png")
    memory = page.locator("table.carrier-memory td.id a").first
    memory_id = memory.inner_text()
    memory.click()
    expect(page.locator("b.state")).to_have_text("active")
    page.click("a#revoke")
    expect(page.locator("ul.cascade")).to_be_visible()  # the dry run: what would go with it
    page.fill("input[name=reason]", "a person found this lesson wrong")
    page.fill("input[name=token]", "not-the-token")
    page.check("input[name=confirm]")
    page.screenshot(path=shots / "viewer-revoke.png")
    page.click("button[type=submit]")
    expect(page.locator("#error")).to_contain_text("token is wrong")
    page.fill("input[name=reason]", "a person found this lesson wrong")
    page.fill("input[name=token]", served.token)
    page.check("input[name=confirm]")
    page.click("button[type=submit]")
    expect(page.locator("#message")).to_contain_text(f"revoked {memory_id}")
    assert memory_id not in page.locator("table.carrier-memory").inner_text()  # gone from the active view
    page.goto(f"{served.url}/runs/{served.run}/lle/items/{memory_id}")
    expect(page.locator("b.state")).to_have_text("revoked")
