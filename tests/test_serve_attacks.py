"""judge-serve under the attacks of issue 28's round 2, on a real server on loopback (and one in this
process where a hook must make a race deterministic).

* The file opened is the file that was checked: a folder swapped for a link out of the root between the
  check and the open is never read (before: the server scored the image outside, 3.13857 against 3.06894).
* One answer whatever the disk holds outside the root: ``/proc/<pid>/root/...`` for a live, a dead and
  another's process, ``/proc/self/cwd/../..``, links out, loops, a NUL byte all get the same status and
  words (before: 200, 422 or 500 by what was there); no answer names a path of the server's disk.
* No input answers 500: JSON nested 100,000 deep, lone surrogates in every text field, on every route;
  the reward route gives the one bad query its fallback and scores the others.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import httpx
import pytest
from PIL import Image
from serving import REPO, running_server, serving_in_process

from judge.serve.config import ServeConfig
from judge.serve.service import JudgeService

pytestmark = pytest.mark.usefixtures("one_thread")
DEMO_IMAGE = REPO / "annotations" / "demo" / "images" / "sa-000-r0-0.png"
PROMPT = "<|im_start|>user\nWhat is shown?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """``root/`` (served: ``images/ok.png``, a link to ``outside/``, a loop of two links) and ``outside/``."""
    base = tmp_path_factory.mktemp("attack")
    root, out = base / "root", base / "outside"
    (root / "images").mkdir(parents=True)
    out.mkdir()
    shutil.copy(DEMO_IMAGE, root / "images" / "ok.png")
    Image.new("RGB", (64, 48), "red").save(out / "secret.png")
    (root / "outlink").symlink_to(out)
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    return root, out


@pytest.fixture(scope="module")
def server(world, tmp_path_factory):
    root, _ = world
    args = ["--judge", "tiny", "--rubric", "mmie", "--image-root", str(root), "--reward-task", "SA"]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def refs_out(root, out) -> list[str]:
    """Paths that leave the root, each a way a client could learn what is outside it from the answer."""
    depth = len(os.getcwd().strip("/").split("/"))
    return [
        f"/proc/{os.getpid()}/root{root}/images/ok.png",  # a live process: resolves back into the root
        f"/proc/{dead_pid()}/root{root}/images/ok.png",  # a dead one
        f"/proc/1/root{root}/images/ok.png",  # another user's process, where readlink may be denied
        "/proc/self/cwd/" + "../" * depth + str(root).lstrip("/") + "/images/ok.png",
        "/proc/self/cwd/../../../../../../../../../etc/passwd",
        "outlink/secret.png",  # a link out, to a file that exists
        "outlink/missing.png",  # ... and to one that does not
        "outlink/../images/ok.png",  # through the link and back up: '..' after a link is the link's parent
        "loop1/x.png",
        "images/ok.png\x00",
        "../outside/secret.png",
        f"{out}/secret.png",
    ]


def masked(text: str, ref: str) -> str:
    return text.replace(repr(ref[:80]), "REF")


def score_item(ref: str) -> dict:
    return {"id": "a", "task": "SA", "question": "Q?", "response": [{"type": "image", "image": ref}]}


def test_every_path_out_of_the_root_gets_one_answer_on_every_route(server, world):
    root, out = world
    score, chat, reward = set(), set(), set()
    for ref in refs_out(root, out):
        r = httpx.post(server.url + "/v1/score", json={"items": [score_item(ref)]}, timeout=30)
        score.add((r.status_code, masked(r.json()["error"]["message"], ref)))
        content = [{"type": "text", "text": "Describe."}, {"type": "image_url", "image_url": {"url": ref}}]
        body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 1}
        r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30)
        chat.add((r.status_code, masked(r.json()["error"]["message"], ref)))
        body = {"query": [PROMPT + "A square.<|im_end|>"], "prompts": [PROMPT], "images": [[ref]]}
        r = httpx.post(server.url + "/v1/reward", json=body, timeout=30)
        assert r.status_code == 200, r.text
        reward.add(masked(r.json()["judge"]["items"][0]["reason"], ref))
    for answers in (score, chat, reward):
        assert len(answers) == 1, answers
        text = str(next(iter(answers)))
        assert "outside the server's --image-root" in text and str(out) not in text and str(root) not in text
    assert {s for s, _ in score} == {422} and {s for s, _ in chat} == {422}
    # The control: the same routes take the image under the root.
    r = httpx.post(server.url + "/v1/score", json={"items": [score_item("images/ok.png")]}, timeout=60)
    assert r.status_code == 200 and r.json()["results"][0]["scores"]["overall"]["status"] == "ok", r.text


def test_no_answer_names_a_path_of_the_servers_disk(server, world):
    root, _ = world
    missing = httpx.post(
        server.url + "/v1/score", json={"items": [score_item("images/missing.png")]}, timeout=60
    ).json()["results"][0]["scores"]["overall"]
    assert missing["status"] == "unscorable" and "'images/missing.png'" in missing["reason"], missing
    assert str(root) not in missing["reason"]
    data = DEMO_IMAGE.read_bytes()
    cut = data[: len(data) // 2]  # a PNG cut short: its header reads, its data does not
    import base64

    url = "data:image/png;base64," + base64.b64encode(cut).decode()
    broken = httpx.post(server.url + "/v1/score", json={"items": [score_item(url)]}, timeout=60)
    reason = broken.json()["results"][0]["scores"]["overall"]["reason"]
    assert "a data URL image" in reason and "judge-serve-" not in reason and "/tmp" not in reason, reason
    content = [{"type": "text", "text": "Describe."}, {"type": "image_url", "image_url": {"url": url}}]
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 1}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 422 and "judge-serve-" not in r.text and "/tmp" not in r.text, r.text


def test_json_nested_100000_deep_is_a_400_on_every_route(server):
    deep = b'{"items": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for route in ("/v1/score", "/v1/chat/completions", "/v1/reward", "/get_reward"):
        r = httpx.post(server.url + route, content=deep, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (route, r.text)
        assert "nested too deeply" in r.json()["error"]["message"]
    # Nested just short of what the parser takes: refused by the fields' own checks, never a 500.
    shallow = b'{"items": [{"id": "a", "task": "SA", "question": "q", "response": "r", "meta": ' + (
        b"[" * 900 + b"]" * 900 + b"}]}"
    )
    r = httpx.post(server.url + "/v1/score", content=shallow, headers={"Content-Type": "application/json"})
    assert r.status_code < 500, r.text


def raw_post(server, route: str, text: str) -> httpx.Response:
    """A body with ``\\ud800`` escapes as written (httpx's own encoder refuses lone surrogates)."""
    return httpx.post(
        server.url + route, content=text.encode(), headers={"Content-Type": "application/json"}, timeout=60
    )


@pytest.mark.parametrize(
    "route, body, field",
    [
        ("/v1/score", '{"items": [{"id": "a", "task": "SA", "question": "Q\\ud800", "response": "r"}]}',
         "items[0].question"),
        ("/v1/score", '{"items": [{"id": "a", "task": "SA", "question": "Q", "response": [{"type": "text", '
         '"text": "\\udfff"}]}]}', "items[0].response[0].text"),
        ("/v1/score", '{"items": [{"id": "a", "task": "SA", "question": "Q", "response": [{"type": "image", '
         '"image": "images/ok.png\\ud800"}]}]}', "items[0].response[0].image"),
        ("/v1/chat/completions", '{"model": "tiny", "messages": [{"role": "user", "content": "hi \\ud800"}]}',
         "messages[0].content"),
        ("/v1/chat/completions", '{"model": "tiny", "messages": [{"role": "user", "content": [{"type": '
         '"image_url", "image_url": {"url": "x\\ud800.png"}}]}]}', "messages[0].content[0].image_url.url"),
        ("/v1/chat/completions", '{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], '
         '"stop": ["\\ud800"]}', "stop[0]"),
    ],
)  # fmt: skip
def test_a_lone_surrogate_is_a_422_naming_its_field(server, route, body, field):
    r = raw_post(server, route, body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["param"] == field and "surrogate" in err["message"], err


def test_a_lone_surrogate_in_one_reward_query_costs_that_query_alone(server):
    good = json.dumps(PROMPT + "A garden.<|im_end|>")[1:-1]
    body = (
        '{"query": ["' + good + '", "' + good.replace("garden", "garden \\ud800") + '", "' + good + '"], '
        '"labels": ["x", "y", "z\\udc00"]}'
    )
    r = raw_post(server, "/get_reward", body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["extra_logs"]["judge_unscorable"] == [0.0, 1.0, 1.0]
    reasons = [it["reason"] for it in got["judge"]["items"]]
    assert "query[1]" in reasons[1] and "labels[2]" in reasons[2] and "surrogate" in reasons[1]
    assert got["rewards"][0] == got["rewards"][0] and got["judge"]["items"][0]["status"] == "ok"


def test_a_folder_swapped_for_a_link_out_after_the_check_is_never_read(world, tmp_path):
    """The race, made deterministic by a hook: the request's image is checked (under the root), then,
    before the batcher opens it, its folder is swapped for a link to a folder outside holding another
    image of the same name. Before: the server scored the image outside."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    shutil.copy(DEMO_IMAGE, root / "sub" / "img.png")
    outside = tmp_path / "outside"
    outside.mkdir()
    Image.new("RGB", (56, 56), "blue").save(outside / "img.png")
    service = JudgeService(ServeConfig(judge="tiny", rubric="mmie", image_root=str(root), max_wait_ms=0))
    service.load()
    real_prepare = service.engine.prepare
    swapped = []

    def prepare(rec, criteria=None, key=None):
        if not swapped:  # after the intake's check, before the engine opens the file
            (root / "sub").rename(root / "sub-moved")
            (root / "sub").symlink_to(outside)
            swapped.append(True)
        return real_prepare(rec, criteria, key=key)

    service.engine.prepare = prepare
    try:
        with serving_in_process(service) as url:
            r = httpx.post(url + "/v1/score", json={"items": [score_item("sub/img.png")]}, timeout=60)
    finally:
        service.close()
    assert swapped and r.status_code == 200, r.text
    got = r.json()["results"][0]["scores"]["overall"]
    assert got["status"] == "unscorable" and got["score"] is None, got
    assert "symbolic link" in got["reason"] and str(root) not in got["reason"], got["reason"]


def test_data_url_images_open_where_the_temporary_folder_is_reached_through_a_link(tmp_path):
    """Data-URL images are written to a temporary folder and opened, like any image, with no link followed
    on the way: the folder's real path is used, so a TMPDIR behind a link (macOS's /var, a moved /tmp)
    still works."""
    import base64

    real = tmp_path / "real-tmp"
    real.mkdir()
    (tmp_path / "tmp-link").symlink_to(real)
    from serving import server_env

    env = server_env(TMPDIR=str(tmp_path / "tmp-link"))
    url = "data:image/png;base64," + base64.b64encode(DEMO_IMAGE.read_bytes()).decode()
    with running_server(["--judge", "tiny", "--rubric", "mmie"], tmp_path, env=env) as s:
        r = httpx.post(s.url + "/v1/score", json={"items": [score_item(url)]}, timeout=60)
    assert r.status_code == 200 and r.json()["results"][0]["scores"]["overall"]["status"] == "ok", r.text
