"""A request's cost is bounded: an image is refused from its header, before any decoding, over the pixel cap
that follows from the judge's own tiling, and a request over its pixel budget is refused; the client sizes
its requests to the budget. Before the fix, eight 40-megapixel white PNGs (a 0.2 MB request) held the server
for seconds and hundreds of MB."""

from __future__ import annotations

import base64
import io
import json
import time

import httpx
import pytest
from PIL import Image
from serving import REPO, running_server

from judge.models.processor import tiling_pixels
from judge.scoring.remote import JudgeClient
from judge.serve.service import PIXELS_OVER_TILING, REQUEST_IMAGES_AT_CAP

DEMO = REPO / "annotations" / "demo"


def data_url(img: Image.Image) -> str:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def demo_items(n: int) -> list[dict]:
    """``n`` demo records with images, as items (human scores dropped)."""
    out = []
    for line in (DEMO / "annotations.jsonl").read_text().splitlines():
        rec = json.loads(line)
        images = [s for f in ("question", "response") for s in rec[f] if s.get("type") == "image"]
        if images:
            out.append({k: rec[k] for k in ("id", "task", "question", "response", "model") if k in rec})
        if len(out) == n:
            return out
    raise AssertionError("not enough demo records with images")


def n_images(item: dict) -> int:
    return sum(1 for f in ("question", "response") for s in item[f] if s.get("type") == "image")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--image-root", str(DEMO)]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def post(server, body, timeout=120.0) -> tuple[httpx.Response, float]:
    t0 = time.perf_counter()
    r = httpx.post(server.url + "/v1/score", json=body, timeout=timeout)
    return r, time.perf_counter() - t0


def test_the_default_pixel_cap_follows_the_judges_tiling(server, tiny):
    limits = httpx.get(server.url + "/v1/judge").json()["limits"]
    tiling = tiling_pixels(tiny[1])
    assert tiling == 2 * 56 * 56  # the tiny judge: two tiles of 56 x 56
    assert limits["max_image_pixels"] == PIXELS_OVER_TILING * tiling
    assert limits["max_request_pixels"] == REQUEST_IMAGES_AT_CAP * PIXELS_OVER_TILING * tiling


def test_huge_images_are_refused_from_their_header_as_fast_as_a_normal_request(server):
    huge = data_url(Image.new("1", (8000, 5000), 1))  # a white 40-megapixel PNG of a few kB
    items = demo_items(8)
    attack = [
        {**x, "id": f"huge-{i}", "response": [{"type": "image", "image": huge}]} for i, x in enumerate(items)
    ]
    assert len(json.dumps({"items": attack})) < 300_000
    normal, t_normal = post(server, {"items": items})
    refused, t_refused = post(server, {"items": attack})
    assert normal.status_code == 200, normal.text
    assert refused.status_code == 413, refused.text
    err = refused.json()["error"]
    assert err["code"] == "image_too_large" and err["param"].startswith("items[0].response[0].image")
    assert "8000x5000 = 40,000,000 pixels" in err["message"] and "--max-image-pixels" in err["message"]
    assert "the judge looks at no more than 6,272" in err["message"]
    assert t_refused < t_normal + 1.0, (t_refused, t_normal)


def test_a_request_over_its_pixel_budget_is_refused(tmp_path):
    items = demo_items(6)
    one = 128 * 96  # every demo image
    budget = 2 * one
    args = [
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--image-root",
        str(DEMO),
        "--max-request-pixels",
        str(budget),
    ]
    with running_server(args, tmp_path) as s:
        fits = [x for x in items if n_images(x) <= 2][:1]
        over = [x for x in items if n_images(x) > 2][:1] or items[:3]
        assert post(s, {"items": fits})[0].status_code == 200
        r, _ = post(s, {"items": over})
        assert r.status_code == 413, r.text
        assert "--max-request-pixels" in r.json()["error"]["message"]
        assert r.json()["error"]["code"] == "image_too_large"
        # judge-score --server and JudgeClient size their requests to the budget: every item is scored
        # (an item alone over it is unscorable, named), with no 413.
        with JudgeClient(s.url) as client:
            got = client.score_records(items, criteria=["overall"], root=DEMO)
        by_id = {r.id: r for r in got}
        for x in items:
            rec = by_id[x["id"]]
            if n_images(x) <= 2:
                assert rec.status == "ok", rec
            else:
                assert rec.status == "unscorable" and "--max-request-pixels" in (rec.reason or ""), rec


def test_an_operator_may_raise_the_cap(tmp_path):
    big = Image.new("RGB", (400, 300), "white")
    args = ["--judge", "tiny", "--rubric", "mmie", "--max-image-pixels", "200000"]
    item = {"id": "a", "task": "SA", "question": "q", "response": [{"type": "image", "image": data_url(big)}]}
    with running_server(args, tmp_path) as s:
        assert httpx.get(s.url + "/v1/judge").json()["limits"]["max_image_pixels"] == 200_000
        r, _ = post(s, {"items": [item], "criteria": ["overall"]})
        assert r.status_code == 200 and r.json()["results"][0]["scores"]["overall"]["status"] == "ok"
