"""judge-view in a real browser: Debian's chromium, headless, driven by Playwright (never a downloaded
browser: ``executable_path``). The site is opened as a user opens it, from disk (``--export``) and from
``judge-view``'s server; the tests filter the list, open an item, check that its pictures were drawn
(``naturalWidth > 0``) and that every number shown equals scores.jsonl's, and save a screenshot.

Needs ``apt-get install -y chromium`` and ``pip install playwright`` (the dev extra); ``.ci/run`` installs both.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from judge.scoring.output import read_records
from judge.testing.browser import CHROMIUM, CHROMIUM_ARGS, wait_for
from judge.view import ViewConfig, export_site, load_view
from judge.view.server import make_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[dev]'")
    if not CHROMIUM.is_file():
        pytest.skip(f"needs Debian's chromium at {CHROMIUM}: apt-get install -y chromium (.ci/run does)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def view(view_run):
    score, rep, audit = view_run
    return load_view(ViewConfig(run=str(score), report=str(rep), audit=str(audit)))


@pytest.fixture(scope="module")
def site(view, tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    export_site(view, out, side=512)
    return (out / "index.html").as_uri()


@pytest.fixture(scope="module")
def served(view):
    srv = make_server(view, "127.0.0.1", 0, 512)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.url + "index.html"
    srv.shutdown()
    srv.server_close()


def _page(browser, errors):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page


def _images_drawn(page, scope: str) -> list[int]:
    wait_for(page, f"[...document.querySelectorAll('{scope} img')].every(i => i.complete)")
    return page.evaluate(f"[...document.querySelectorAll('{scope} img')].map(i => i.naturalWidth)")


@pytest.mark.parametrize("where", ["export", "served"])
def test_filter_open_an_item_and_see_its_pictures_and_its_scores(
    browser, view_run, site, served, where, tmp_path
):
    score, _, _ = view_run
    url = site if where == "export" else served
    records = read_records(score / "scores.jsonl")
    human_file = Path(json.loads((score / "run.json").read_text())["inputs"][0]["path"])
    annotations = {json.loads(x)["id"]: json.loads(x) for x in human_file.read_text().splitlines()}
    errors: list[str] = []
    page = _page(browser, errors)

    # The first page: the verdicts first, the run, its leaderboard, the report's and the audit's plots, drawn.
    page.goto(url)
    wait_for(page, "window.JV && JV.state.timing.summaryRendered")
    first = page.locator("#page-summary h2").first.inner_text()
    assert first == "Verdict" and "Leaderboard" in page.inner_text("#page-summary")
    widths = _images_drawn(page, "#page-summary")
    assert len(widths) >= 3 and all(w > 0 for w in widths), widths

    # The list: every score record, disagreements with the annotators first.
    page.click("#nav-items")
    page.wait_for_selector("#list-body .row")
    assert page.inner_text("#count").startswith(f"{len(records)} of {len(records)} score records")
    diffs = [
        float(x)
        for x in page.eval_on_selector_all(
            "#list-body .row [data-col=diff]", "e => e.map(x => x.textContent)"
        )
    ]
    assert diffs == sorted(diffs, reverse=True) and len(diffs) > 5

    # Filtering, without a page load: the overall score of model-a.
    page.evaluate("window.__same_page = true")
    page.select_option("#filters [name=criterion]", label="overall")
    page.select_option("#filters [name=model]", label="model-a")
    overall_a = [r for r in records if r["criterion"] == "overall" and r["model"] == "model-a"]
    wait_for(page, f"JV.state.order.length === {len(overall_a)}")
    assert page.inner_text("#count").startswith(f"{len(overall_a)} of {len(records)}")
    shown = page.eval_on_selector_all(
        "#list-body .row", "e => e.map(x => x.children[3].textContent + '|' + x.children[1].textContent)"
    )
    assert shown and set(shown) == {"overall|model-a"}
    page.fill("#filters [name=scoreMin]", "3.2")
    expected = sum(1 for r in overall_a if r["score"] is not None and r["score"] >= 3.2)
    wait_for(page, f"JV.state.order.length === {expected}")
    assert page.evaluate("window.__same_page") is True

    # An item: its pictures drawn, each score and each annotator's as scores.jsonl and the file have them.
    page.fill("#filters [name=scoreMin]", "")
    page.select_option("#filters [name=model]", label="all")
    page.fill("#filters [name=id]", "sa-")
    wait_for(page, "JV.state.order.length > 0")
    item_id = page.inner_text("#list-body .row >> nth=0 >> span >> nth=0")
    page.click("#list-body .row >> nth=0")
    page.wait_for_selector("[data-testid=judge-scores]")
    assert page.inner_text("[data-testid=item-id]") == item_id
    widths = _images_drawn(page, "#page-item > .content")
    n_images = sum(
        1 for part in ("question", "response") for s in annotations[item_id][part] if s["type"] == "image"
    )
    assert len(widths) == n_images and all(w > 0 for w in widths), widths
    texts = page.eval_on_selector_all("#page-item [data-part=response] p", "e => e.map(x => x.textContent)")
    assert texts == [s["text"] for s in annotations[item_id]["response"] if s["type"] == "text"]
    for rec in (r for r in records if r["id"] == item_id):
        row = f"#page-item tr[data-criterion={rec['criterion']}]"
        assert page.inner_text(f"{row} [data-col=score]") == f"{rec['score']:.3f}"
        for annotator, scores in annotations[item_id]["scores"].items():
            assert page.inner_text(f"{row} [data-col='human:{annotator}']") == str(scores[rec["criterion"]])
        bars = page.eval_on_selector_all(f"{row} svg.dist rect", "e => e.length")
        assert bars == len(rec["distribution"]) == 7
    # The audit's versions of this response, with their scores.
    assert page.locator("#page-item details[data-version=blank-images]").count() == 1
    shot = tmp_path / f"judge-view-item-{where}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 10_000
    assert errors == []
    page.close()


def test_the_served_view_refuses_files_outside_its_roots_in_the_browser_too(browser, served, view):
    page = browser.new_page()
    page.goto(served)
    for path in ("img/0/../../../../etc/passwd.webp", "img/0/annotations.jsonl.webp", "../run.json"):
        got = page.request.get(served.replace("index.html", "") + path)
        assert got.status == 404, path
    page.close()


def test_waiting_on_the_served_page_works_under_its_content_security_policy(browser, served):
    """The tests' wait (judge.testing.browser.wait_for) on a condition that is false at first, on the served
    viewer whose CSP refuses eval: Playwright's wait_for_function failed there whenever the page was slower
    than its first check (seen once in CI's run); a condition never met ends in a TimeoutError that names it."""
    page = _page(browser, [])
    page.goto(served)
    wait_for(page, "window.JV && JV.state.timing.summaryRendered")
    page.evaluate("setTimeout(() => { window.__later = true; }, 300)")
    wait_for(page, "window.__later === true", timeout_s=10)
    with pytest.raises(TimeoutError, match="window.__never"):
        wait_for(page, "window.__never === true", timeout_s=0.3)
    page.close()
