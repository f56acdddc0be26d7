"""Opening images: resolution beneath a root that never looks outside it, one descriptor from the check to
the bytes (no link followed on the way), an allow-list of formats, and every frame's size checked from the
file's structure before anything is decoded (hand-made files whose headers lie,
:mod:`judge.testing.image_bombs`)."""

from __future__ import annotations

import io
import os
import resource
import shutil
import subprocess
import sys
import time

import httpx
import pytest
from PIL import Image
from serving import REPO, running_server

from judge.core.errors import ImageError, ImageTooLarge, PathRefused, UnsupportedImage
from judge.core.image_headers import frame_sizes
from judge.core.images import ImageLimits, open_image, read_image_bytes, resolve_beneath, resolve_image
from judge.testing.image_bombs import BOMBS, ico_with_huge_png

DEMO_IMAGE = REPO / "annotations" / "demo" / "images" / "sa-000-r0-0.png"
SMALL_CAP = ImageLimits(max_pixels=1_000_000)


@pytest.fixture
def tree(tmp_path):
    root, out = tmp_path / "root", tmp_path / "out"
    (root / "a" / "b").mkdir(parents=True)
    out.mkdir()
    Image.new("RGB", (8, 8), "red").save(root / "a" / "b" / "x.png")
    Image.new("RGB", (8, 8), "blue").save(out / "x.png")
    (root / "in-rel").symlink_to("a/b")
    (root / "in-abs").symlink_to(root / "a")
    (root / "out-link").symlink_to(out)
    (root / "up-link").symlink_to("../out")
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    return root, out


@pytest.mark.parametrize(
    "ref, want",
    [
        ("a/b/x.png", "a/b/x.png"),
        ("in-rel/x.png", "a/b/x.png"),  # links inside the root are followed, to their real path
        ("in-abs/b/x.png", "a/b/x.png"),
        ("a/../a/b/x.png", "a/b/x.png"),
        ("a/b/missing.png", "a/b/missing.png"),  # missing: kept as written, the open reports it
        ("missing/../a/b/x.png", "a/b/x.png"),
    ],
)
def test_references_inside_the_root_resolve_to_their_real_path(tree, ref, want):
    root, _ = tree
    assert resolve_beneath(str(root), ref) == str(root / want)
    assert resolve_beneath(str(root), str(root / ref)) == str(root / want)


@pytest.mark.parametrize(
    "ref",
    ["out-link/x.png", "up-link/x.png", "../out/x.png", "a/../../out/x.png", "loop1/x.png", "a\x00b.png",
     "\ud800.png", "/proc/self/cwd/x.png", "/proc/1/root/etc/passwd", "out-link/../a/b/x.png",
     "missing/../../out/x.png"],
)  # fmt: skip
def test_references_that_leave_or_loop_are_refused_alike(tree, ref):
    root, out = tree
    with pytest.raises(PathRefused) as e:
        resolve_beneath(str(root), ref)
    with pytest.raises(PathRefused) as loaded:
        resolve_image(ref, root)
    assert str(out) not in str(e.value) and "leaves its root" in str(loaded.value)


def test_a_folder_swapped_for_a_link_after_resolution_is_not_read(tree):
    root, out = tree
    path = resolve_beneath(str(root), "a/b/x.png")
    assert open_image(path).getpixel((0, 0)) == (255, 0, 0)
    (root / "a").rename(root / "a-moved")
    (root / "a").symlink_to(out.parent / "fake")
    (out.parent / "fake" / "b").mkdir(parents=True)
    shutil.copy(out / "x.png", out.parent / "fake" / "b" / "x.png")
    with pytest.raises(ImageError, match="symbolic link"):
        read_image_bytes(path)
    (root / "a").unlink()
    (root / "a").mkdir()  # a plain folder put back: what is there now is read, under the root
    (root / "a" / "b").symlink_to(out)  # ... but a link as the last folder is refused too
    with pytest.raises(ImageError, match="symbolic link"):
        read_image_bytes(path)
    (root / "a" / "b").unlink()
    (root / "a" / "b").mkdir()
    (root / "a" / "b" / "x.png").symlink_to(out / "x.png")  # and a link as the file itself
    with pytest.raises(ImageError, match="symbolic link"):
        read_image_bytes(path)


def test_a_fifo_or_a_folder_is_refused_without_blocking(tree):
    root, _ = tree
    os.mkfifo(root / "pipe.png")
    t0 = time.monotonic()
    with pytest.raises(ImageError, match="not a file"):
        read_image_bytes(str(root / "pipe.png"))
    with pytest.raises(ImageError, match="not a file"):
        read_image_bytes(str(root / "a"))
    assert time.monotonic() - t0 < 1


@pytest.mark.parametrize("name", BOMBS)
def test_a_file_whose_header_lies_is_refused_before_decoding(tmp_path, name):
    make, status = BOMBS[name]
    data = make(4000) if name in ("ico_huge_png", "cur_huge_png") else make()
    path = tmp_path / name
    path.write_bytes(data)
    t0 = time.monotonic()
    with pytest.raises(ImageTooLarge if status == 413 else UnsupportedImage):
        open_image(str(path), SMALL_CAP)
    assert time.monotonic() - t0 < 0.5


def test_refusing_a_huge_icon_costs_no_memory(tmp_path):
    """In a fresh process: the peak resident memory after refusing an ICO that holds a 9459 x 9459 PNG is
    what it was before (before the allow-list, Pillow decoded it inside ``Image.open``: +343 MB, 4.6 s)."""
    path = tmp_path / "huge.ico"
    path.write_bytes(ico_with_huge_png(9459))
    code = (
        "import resource, sys, time\n"
        "from judge.core.images import open_image\n"
        "from judge.core.errors import UnsupportedImage\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "t = time.monotonic()\n"
        "try:\n    open_image(sys.argv[1])\nexcept UnsupportedImage:\n    pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, time.monotonic() - t)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout.split()
    grown_kb, seconds = int(out[0]), float(out[1])
    assert grown_kb < 16 * 1024 and seconds < 0.5, out


def test_real_images_of_every_allowed_format_open_and_their_frames_are_read(tmp_path):
    """The controls: Pillow-made files of every allowed format (animated ones too, an interlaced PNG, a
    JPEG with an EXIF thumbnail) open, and the sizes read from their structure are Pillow's."""
    frames = [Image.new("RGB", (40, 30), c) for c in ("red", "green", "blue")]
    made = {}
    for fmt, kw in [
        ("PNG", {}),
        ("PNG", {"save_all": True, "append_images": frames[1:]}),  # APNG
        ("GIF", {"save_all": True, "append_images": frames[1:]}),
        ("WEBP", {"save_all": True, "append_images": frames[1:], "lossless": True}),
        ("WEBP", {"quality": 80}),
        ("BMP", {}),
        ("JPEG", {"exif": Image.Exif()}),
    ]:
        buf = io.BytesIO()
        frames[0].save(buf, fmt, **kw)
        made[f"{fmt}-{len(made)}"] = buf.getvalue()
    buf = io.BytesIO()
    frames[0].save(buf, "PNG", interlace=1)  # Pillow writes no interlaced PNG: the flag is ignored, kept
    made["PNG-interlace"] = buf.getvalue()
    for name, data in made.items():
        path = tmp_path / name
        path.write_bytes(data)
        img = open_image(str(path), SMALL_CAP)
        assert img.size == (40, 30), name
        assert max(w * h for w, h in frame_sizes(data)) == 40 * 30, (name, frame_sizes(data))
    assert resource  # imported for the memory test above


@pytest.fixture(scope="module")
def bomb_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("bombs")
    for name, (make, _) in BOMBS.items():
        (root / name).write_bytes(make(4000) if name in ("ico_huge_png", "cur_huge_png") else make())
    shutil.copy(DEMO_IMAGE, root / "ok.png")
    with running_server(["--judge", "tiny", "--rubric", "mmie", "--image-root", str(root)], root) as s:
        yield s


def server_rss_kb(server) -> int:
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_the_server_refuses_each_lying_file_at_once_with_its_status(bomb_server):
    httpx.post(  # a normal request first: the peak below is the serving peak, not the start-up's
        bomb_server.url + "/v1/score",
        json={
            "items": [
                {"id": "a", "task": "SA", "question": "Q", "response": [{"type": "image", "image": "ok.png"}]}
            ]
        },
        timeout=60,
    ).raise_for_status()
    before = server_rss_kb(bomb_server)
    for name, (_, status) in BOMBS.items():
        item = {"id": "a", "task": "SA", "question": "Q", "response": [{"type": "image", "image": name}]}
        t0 = time.monotonic()
        r = httpx.post(bomb_server.url + "/v1/score", json={"items": [item]}, timeout=60)
        assert r.status_code == status, (name, r.text)
        assert time.monotonic() - t0 < 1.0, name
        assert r.json()["error"]["param"] == "items[0].response[0].image"
    assert server_rss_kb(bomb_server) - before < 32 * 1024
