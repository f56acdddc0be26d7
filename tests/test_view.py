"""judge-view without a browser: what the site holds (every score record, the humans, the audit, the
plots), the static export, and the server's containment: it opens no file outside the run's image roots,
whatever the request names, and sends only images. The browser tests are in test_view_browser.py."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import httpx
import pytest

from judge.core.errors import ConfigError
from judge.scoring.output import read_records
from judge.view import ViewConfig, export_site, load_view, site_files
from judge.view.server import make_server


def load_js(data: bytes, call: str) -> list:
    """The arguments of a data file ``call(...);``."""
    text = data.decode("utf-8").strip()
    assert text.startswith(call + "(") and text.endswith(");")
    return json.loads("[" + text[len(call) + 1 : -2] + "]")


@pytest.fixture(scope="module")
def view(view_run):
    score, rep, audit = view_run
    return load_view(ViewConfig(run=str(score), report=str(rep), audit=str(audit)))


@pytest.fixture(scope="module")
def files(view):
    return site_files(view)


def test_the_list_holds_every_score_record_with_its_human_score(view_run, view, files):
    score, _, _ = view_run
    records = read_records(score / "scores.jsonl")
    (index,) = load_js(files["data/index.js"], "JV.index")
    rows, items, strings = index["rows"], index["items"], index["strings"]
    assert len(rows["item"]) == len(records) == 36 * 7
    human_file = Path(json.loads((score / "run.json").read_text())["inputs"][0]["path"])
    annotations = {json.loads(x)["id"]: json.loads(x) for x in human_file.read_text().splitlines()}
    seen = set()
    for r in range(len(rows["item"])):
        item = rows["item"][r]
        rid, crit = items["id"][item], strings["criterion"][rows["criterion"][r]]
        rec = next(x for x in records if x["id"] == rid and x["criterion"] == crit)
        assert rows["score"][r] == rec["score"]
        human = [a[crit] for a in annotations[rid]["scores"].values()]
        assert rows["human"][r] == pytest.approx(sum(human) / len(human))
        assert strings["model"][items["model"][item]] == rec["model"]
        seen.add((rid, crit))
    assert len(seen) == len(records)


def test_an_item_page_has_its_content_in_order_its_scores_humans_and_audit(view, files):
    chunks = [load_js(files[k], "JV.chunk") for k in sorted(files) if k.startswith("data/items-")]
    items = [it for _, chunk in chunks for it in chunk]
    assert [it["i"] for it in items] == list(range(36))
    sa = next(it for it in items if it["task"] == "SA")
    # Text and images in reading order, as the record has them; each image a site URL.
    kinds = [seg["type"] for seg in sa["content"]["response"]]
    assert "image" in kinds and "text" in kinds
    assert all(
        seg["src"].startswith("img/") and seg["src"].endswith(".webp")
        for seg in sa["content"]["response"]
        if seg["type"] == "image"
    )
    # The rubric's order, overall last; a distribution per criterion; every annotator's score.
    assert [j["criterion"] for j in sa["judge"]][-1] == "overall" and len(sa["judge"]) == 7
    assert all(len(j["distribution"]) == 7 for j in sa["judge"])
    assert set(sa["human"]) == {"ann1", "ann2", "ann3"}
    versions = {v["version"] for v in sa["audit"]}
    assert versions == {"original", "blank-images", "off-topic"}
    blank = next(v for v in sa["audit"] if v["version"] == "blank-images")
    assert set(blank["scores"]) == {j["criterion"] for j in sa["judge"]}
    assert any(seg["type"] == "image" for seg in blank["response"])


def test_the_first_page_has_the_verdicts_the_leaderboard_the_report_and_the_audit(files):
    (index,) = load_js(files["data/index.js"], "JV.index")
    titles = [s["title"] for s in index["summary"]["sections"]]
    # The verdicts first (tests/test_verdict.py: what they say), then the run and its leaderboard.
    assert titles[:3] == ["Verdict", f"Run {index['title'].removeprefix('judge-view: ')}", "Leaderboard"]
    assert any(t.startswith("Agreement with humans") for t in titles)
    # Each board's caption says what it is ranked by (the all-tasks board may follow PPI, a task's the judge).
    board_tables = index["summary"]["sections"][titles.index("Leaderboard")]["tables"]
    assert board_tables and all(": ranked by the " in t["caption"] for t in board_tables)
    assert any(t.startswith("Audit") for t in titles)
    plots = [p["src"] for s in index["summary"]["sections"] for p in s.get("plots", [])]
    assert "plots/leaderboard.png" in plots and "plots/audit.png" in plots
    assert any(p.startswith("plots/report-") for p in plots)
    assert all(files[p].startswith(b"\x89PNG") for p in plots)


def test_fields_it_does_not_know_are_shown_and_filterable(view_run, tmp_path):
    """A record field added later (a selective-evaluation flag) reaches the list and the item page."""
    score, _, _ = view_run
    copy = tmp_path / "score"
    shutil.copytree(score, copy)
    lines = (copy / "scores.jsonl").read_text().splitlines()
    marked = []
    for k, line in enumerate(lines):
        rec = json.loads(line)
        rec["trusted"] = k % 3 != 0
        marked.append(json.dumps(rec))
    (copy / "scores.jsonl").write_text("\n".join(marked) + "\n")
    files = site_files(load_view(ViewConfig(run=str(copy))))
    (index,) = load_js(files["data/index.js"], "JV.index")
    assert index["flags"]["trusted"][:4] == [False, True, True, False]
    (_, chunk) = load_js(files["data/items-0.js"], "JV.chunk")
    assert all("trusted" in j["extra"] for j in chunk[0]["judge"])


def test_export_writes_a_site_that_needs_nothing_else(view, tmp_path):
    out = tmp_path / "site"
    counts = export_site(view, out, side=512)
    assert counts["images_not_shown"] == 0 and counts["images"] > 36
    for name in ("index.html", "app.js", "style.css", "data/index.js", "data/items-0.js"):
        assert (out / name).is_file()
    html = (out / "index.html").read_text()
    assert "http" not in html.replace("http-equiv", "")  # nothing fetched from elsewhere
    webp = list((out / "img").rglob("*.webp"))
    assert len(webp) == counts["images"] and all(p.read_bytes()[8:12] == b"WEBP" for p in webp)
    with pytest.raises(ConfigError, match="not empty"):
        export_site(view, out, side=512)
    export_site(view, out, side=512, overwrite=True)


def test_missing_inputs_and_bad_folders_are_said_plainly(view_run, tmp_path):
    score, _, _ = view_run
    with pytest.raises(ConfigError, match="no run.json in it; expected the folder judge-score wrote"):
        load_view(ViewConfig(run=str(tmp_path)))
    with pytest.raises(ConfigError, match="`run` .*: no such folder"):
        load_view(ViewConfig(run=str(tmp_path / "nowhere")))
    # Inputs moved away since the run: the scores are shown, with a warning, without content.
    copy = tmp_path / "moved"
    shutil.copytree(score, copy)
    run = json.loads((copy / "run.json").read_text())
    for event in run["history"]:
        event["inputs"] = [str(tmp_path / "gone.jsonl")]
    (copy / "run.json").write_text(json.dumps(run))
    v = load_view(ViewConfig(run=str(copy)))
    assert any("gone.jsonl" in w and "not found" in w for w in v.warnings)
    assert all(it.content is None for it in v.items) and len(v.items) == 36


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.7", "example.org", "::"])
def test_it_serves_on_loopback_only(host, capsys):
    from judge.cli.view import main

    with pytest.raises(ConfigError, match="not a loopback address"):
        ViewConfig(run="x", host=host)
    assert main(["x", "--host", host]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --host") and "loopback" in err


@pytest.fixture(scope="module")
def server(view):
    srv = make_server(view, "127.0.0.1", 0, 512)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_the_server_sends_the_site_and_the_run_images(server, files):
    page = httpx.get(server.url)
    assert page.status_code == 200 and page.content == files["index.html"]
    assert "default-src 'self'" in page.headers["content-security-policy"]
    (_, chunk) = load_js(files["data/items-0.js"], "JV.chunk")
    src = next(seg["src"] for it in chunk for seg in it["content"]["response"] if seg["type"] == "image")
    img = httpx.get(server.url + src)
    assert img.status_code == 200 and img.headers["content-type"] == "image/webp"
    assert img.content[8:12] == b"WEBP"


def test_the_server_opens_nothing_outside_the_run_image_roots(server, view, tmp_path):
    """Attacks on the image route: climbing out (plain, encoded, doubled), absolute paths, a symlink out of
    the root, a file that is not an image inside the root, another root number, the site's own files."""
    root = view.roots.roots[0]
    secret = tmp_path / "secret.png"
    shutil.copy(next(root.rglob("*.png")), secret)  # a real image, outside every root
    link = root / "images" / "link-out.png"
    os.symlink(secret, link)
    try:
        rel_secret = os.path.relpath(secret, root)
        attempts = [
            f"img/0/{rel_secret}.webp",
            "img/0/" + rel_secret.replace("/", "%2F") + ".webp",
            "img/0/" + rel_secret.replace("..", "%2e%2e") + ".webp",
            f"img/0/{secret}.webp",
            f"img/0//{secret}.webp",
            "img/0/images/link-out.png.webp",
            "img/0/annotations.jsonl.webp",
            f"img/{len(view.roots.roots)}/images/{next(root.rglob('*.png')).name}.webp",
            "img/-1/x.png.webp",
            "../../../../etc/passwd",
            "%2e%2e/%2e%2e/etc/passwd",
            "data/../../secret.png",
        ]
        for path in attempts:
            got = httpx.get(server.url + path)
            assert got.status_code == 404, (path, got.status_code)
            assert b"WEBP" not in got.content[:16] and b"PNG" not in got.content[:16]
    finally:
        link.unlink()


# ----------------------------------------------------------------------------- DNS rebinding (judge.core.hosts)


def test_the_server_refuses_a_foreign_host_on_every_file_and_image(server, files):
    """Before: the whole run (data/index.js) and every image went to any page whose name was rebound to
    127.0.0.1 (``Host: attacker.example``). Now 421 for every path and method, before any file is read."""
    (_, chunk) = load_js(files["data/items-0.js"], "JV.chunk")
    image = next(seg["src"] for it in chunk for seg in it["content"]["response"] if seg["type"] == "image")
    port = server.server_address[1]
    paths = [
        "",
        "index.html",
        "data/index.js",
        image,
        "img/0/nothing.png.webp",
        "no-such-file",
        *list(files)[:20],
    ]
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example"):
        for path in paths:
            for method in ("GET", "HEAD", "POST"):
                got = httpx.request(method, server.url + path, headers={"Host": host})
                assert got.status_code == 421, (host, path, method, got.status_code)
                assert b"JV." not in got.content and b"WEBP" not in got.content[:16]
        assert "--allowed-host" in httpx.get(server.url + "data/index.js", headers={"Host": host}).text


def test_the_server_answers_loopback_names_and_refuses_foreign_origins(server, files):
    port = server.server_address[1]
    for host in ("localhost", f"localhost:{port}", "127.0.0.1", f"[::1]:{port}", "[::1]"):
        got = httpx.get(server.url + "data/index.js", headers={"Host": host})
        assert got.status_code == 200 and got.content == files["data/index.js"], host
    for origin in ("http://attacker.example", "null", f"http://attacker.example:{port}"):
        got = httpx.get(server.url + "data/index.js", headers={"Origin": origin})
        assert got.status_code == 403 and b"JV." not in got.content, origin
    got = httpx.get(server.url + "data/index.js", headers={"Origin": f"http://localhost:{port}"})
    assert got.status_code == 200
    assert not any(k.lower().startswith("access-control-") for k in got.headers)


def test_the_server_on_ipv6_loopback_answers_its_own_address(view):
    srv = make_server(view, "::1", 0, 512)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        assert srv.url.startswith("http://[::1]:")
        assert httpx.get(srv.url + "data/index.js").status_code == 200  # Host: [::1]:<port>
        assert httpx.get(srv.url + "data/index.js", headers={"Host": "attacker.example"}).status_code == 421
    finally:
        srv.shutdown()
        srv.server_close()


def test_allowed_host_adds_a_name_from_the_command_line(view_run):
    """``judge-view RUN --allowed-host NAME`` (a reverse proxy's public name): that name is served, others
    are still refused."""
    import signal
    import subprocess
    import sys

    score, _, _ = view_run
    cmd = [
        sys.executable,
        "-m",
        "judge.cli.view",
        str(score),
        "--port",
        "0",
        "--allowed-host",
        "view.example.org",
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    # Ctrl-C's signal at its default in the server, even where this run's shell started it in the background
    # (which ignores SIGINT, and an ignored signal is inherited: the server would never stop).
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        lines = [proc.stdout.readline()]
        while lines[-1] and "serving http://" not in lines[-1]:  # log lines may come first
            lines.append(proc.stdout.readline())
        line = lines[-1]
        assert "serving http://" in line, lines
        url = line.split("serving ")[1].split()[0]
        assert httpx.get(url + "data/index.js", headers={"Host": "view.example.org"}).status_code == 200
        assert httpx.get(url, headers={"Origin": "https://view.example.org"}).status_code == 200
        assert httpx.get(url, headers={"Host": "view.example.org.attacker.example"}).status_code == 421
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:  # a server that did not stop fails the test, and is not left running
                proc.kill()


def test_another_site_cannot_include_the_run_as_a_script(server, files):
    """``<script src=http://127.0.0.1:8765/data/index.js>`` on another site's page sends no Origin, and the
    file calls ``JV.index(...)``, a function that page can define: before, it read the whole run. The
    browser's Fetch Metadata says where the request came from; a link the user followed still opens."""
    script = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"}
    got = httpx.get(server.url + "data/index.js", headers=script)
    assert got.status_code == 403 and b"JV." not in got.content
    image = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
    assert httpx.get(server.url + "data/index.js", headers=image).status_code == 403
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    page = httpx.get(server.url, headers=link)
    assert page.status_code == 200 and page.content == files["index.html"]
    own = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"}
    got = httpx.get(server.url + "data/index.js", headers=own)
    assert got.status_code == 200 and got.headers["cross-origin-resource-policy"] == "same-origin"
