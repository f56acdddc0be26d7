"""No image outside its root is opened, whatever record form or field carries it: judge-serve's items in
every form of the record-format registry (``RECORD_FORMATS``) x every image-bearing field of that form x
every kind of path out (absolute, ``../``, a symlink out, a FIFO, ``file://``, ``http://``, a missing file),
with and without ``--image-root``; the chat route's ``image_url``; the reward route's ``images``; and the file
loaders. The cases are generated from the registry, so a form registered later is covered without a new test.

Before the fix, MMIE-form items carried images in ``answer`` and ``gt_answer`` past the check, and the
server opened ``/etc/shadow`` or ``../outside/secret.png`` for anyone who asked."""

from __future__ import annotations

import json
import os
import shutil

import httpx
import pytest
from PIL import Image
from serving import REPO, running_server

from judge.core.errors import RecordError
from judge.core.io import RECORD_FORMATS, InvalidRecordsError, load_predictions

KEY = "sk-paths"
AUTH = {"Authorization": f"Bearer {KEY}"}
#: Each kind of image reference that leaves the root (``{out}`` is the outside folder's absolute path).
KINDS = {
    "absolute": "{out}/secret.png",
    "dotdot": "../outside/secret.png",
    "symlink": "link.png",
    "fifo": "{out}/pipe.png",
    "file_url": "file://{out}/secret.png",
    "http_url": "http://127.0.0.1:9/secret.png",
    "missing": "{out}/missing.png",
}
CASES = [
    pytest.param(fmt, fld, kind, id=f"{fmt}-{fld}-{kind}")
    for fmt, spec in RECORD_FORMATS.items()
    for fld in spec.image_fields
    for kind in KINDS
]
FIELDS = [
    pytest.param(fmt, fld, id=f"{fmt}-{fld}")
    for fmt, spec in RECORD_FORMATS.items()
    for fld in spec.image_fields
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """``root/`` (served; a real image and a symlink out), and ``outside/`` beside it (a real image and a
    FIFO, which blocks whoever opens it for reading)."""
    base = tmp_path_factory.mktemp("world")
    root, out = base / "root", base / "outside"
    (root / "images").mkdir(parents=True)
    out.mkdir()
    shutil.copy(REPO / "annotations" / "demo" / "images" / "sa-000-r0-0.png", root / "images" / "ok.png")
    Image.new("RGB", (64, 48), "red").save(out / "secret.png")
    os.mkfifo(out / "pipe.png")
    (root / "link.png").symlink_to(out / "secret.png")
    return root, out


@pytest.fixture(scope="module")
def servers(world, tmp_path_factory):
    """A keyed server with ``--image-root``, and an open one without: both must refuse every case."""
    root, _ = world
    tiny = ["--judge", "tiny", "--rubric", "mmie"]
    log = tmp_path_factory.mktemp("log")
    with running_server([*tiny, "--image-root", str(root), "--api-key", KEY], log) as rooted:
        with running_server(tiny, log) as bare:
            yield {"rooted": (rooted, AUTH), "bare": (bare, {})}


def ref_of(kind: str, world) -> str:
    return KINDS[kind].format(out=world[1])


def assert_refused_alike(message: str, ref: str, kind: str, server_kind: str, world) -> None:
    """A refusal of a path out of the root says why in the same words whether the file exists or not, and
    no word of what is behind the path; a URL is refused as one (nothing is fetched)."""
    if kind in ("absolute", "dotdot", "symlink", "fifo", "missing"):
        masked = message.replace(repr(ref), "REF")
        expected = (
            "outside the server's --image-root" if server_kind == "rooted" else "started without --image-root"
        )
        assert expected in masked, masked
        for leak in ("does not exist", "cannot be read", "not a file", str(world[1])):
            assert leak not in masked, masked
    else:
        assert "fetches nothing" in message, message


@pytest.mark.parametrize("server_kind", ["rooted", "bare"])
@pytest.mark.parametrize("fmt, fld, kind", CASES)
def test_a_path_out_of_the_root_is_refused_in_every_form_and_field(
    servers, world, server_kind, fmt, fld, kind
):
    server, headers = servers[server_kind]
    ref = ref_of(kind, world)
    item = RECORD_FORMATS[fmt].example(fld, ref)
    r = httpx.post(server.url + "/v1/score", json={"items": [item]}, headers=headers, timeout=20)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == "invalid_item"
    assert err["param"].startswith("items[0]")
    renamed = fld in RECORD_FORMATS[fmt].renamed.values()
    native = f"field '{fld} (read as" if renamed else f"field '{fld}["
    assert native in err["message"], err["message"]
    assert_refused_alike(err["message"], ref, kind, server_kind, world)


@pytest.mark.parametrize("server_kind", ["rooted", "bare"])
def test_existing_and_missing_files_out_of_the_root_are_answered_alike(servers, world, server_kind):
    server, headers = servers[server_kind]
    answers = []
    for ref in (f"{world[1]}/secret.png", f"{world[1]}/missing.png", "/etc/shadow", "/etc/nope"):
        item = RECORD_FORMATS["mmie"].example("answer", ref)
        r = httpx.post(server.url + "/v1/score", json={"items": [item]}, headers=headers, timeout=20)
        answers.append((r.status_code, r.json()["error"]["message"].replace(repr(ref), "REF")))
    assert len(set(answers)) == 1, answers


@pytest.mark.parametrize("fmt, fld", FIELDS)
def test_an_image_under_the_root_is_taken_in_every_form_and_field(servers, fmt, fld):
    """The control: the same field with a path under --image-root is read (so the check above ran on a
    field the server really uses, not on one it ignores)."""
    server, headers = servers["rooted"]
    item = RECORD_FORMATS[fmt].example(fld, "images/ok.png")
    r = httpx.post(server.url + "/v1/score", json={"items": [item]}, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    scores = r.json()["results"][0]["scores"]
    assert all(s["status"] == "ok" for s in scores.values()), scores
    bare, _ = servers["bare"]
    assert httpx.post(bare.url + "/v1/score", json={"items": [item]}, timeout=20).status_code == 422


@pytest.mark.parametrize("server_kind", ["rooted", "bare"])
@pytest.mark.parametrize("kind", KINDS)
def test_chat_image_urls_out_of_the_root_are_refused(servers, world, server_kind, kind):
    server, headers = servers[server_kind]
    ref = ref_of(kind, world)
    content = [
        {"type": "text", "text": "Describe it."},
        {"type": "image_url", "image_url": {"url": ref}},
    ]
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 2}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, headers=headers, timeout=20)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["param"] == "messages[0].content[1].image_url"
    assert_refused_alike(err["message"], ref, kind, server_kind, world)


@pytest.mark.parametrize("server_kind", ["rooted", "bare"])
@pytest.mark.parametrize("kind", KINDS)
def test_reward_route_images_out_of_the_root_are_refused(servers, world, server_kind, kind):
    """The reward route reads its images through the same check: an image out of the root makes its query
    unscorable (the fallback reward, flagged), in the same words whether the file exists or not."""
    server, headers = servers[server_kind]
    prompt = "<|im_start|>user\nWhat is shown?<|im_end|>\n<|im_start|>assistant\n"
    ref = ref_of(kind, world)
    body = {
        "query": [prompt + "A red square.<|im_end|>"],
        "prompts": [prompt],
        "images": [[ref]],
        "task": "SA",
    }
    r = httpx.post(server.url + "/v1/reward", json=body, headers=headers, timeout=20)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["extra_logs"]["judge_unscorable"] == [1.0]
    assert_refused_alike(got["judge"]["items"][0]["reason"], ref, kind, server_kind, world)


@pytest.mark.parametrize("fmt, fld, kind", CASES)
def test_file_loaders_refuse_a_path_out_of_the_files_folder(world, tmp_path, fmt, fld, kind):
    """``judge-score`` and the other file readers: the same registry, the same one check, against the
    record file's folder."""
    root, _ = world
    path = root / f"records-{tmp_path.name}.jsonl"
    path.write_text(json.dumps(RECORD_FORMATS[fmt].example(fld, ref_of(kind, world))) + "\n")
    try:
        with pytest.raises(InvalidRecordsError) as exc:
            load_predictions(path)
    finally:
        path.unlink()
    (err,) = exc.value.errors
    assert isinstance(err, RecordError) and err.line == 1 and err.field is not None and fld in err.field
    assert "leaves its root" in err.message or "URL" in err.message, err.message
