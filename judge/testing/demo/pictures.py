"""The demo set's pictures: flat-colour shapes on scenes, groups and bar charts, drawn with PIL."""

from __future__ import annotations

import io
import math
import random
import re

from PIL import Image, ImageDraw

IMAGE_SIZE = (128, 96)
GROUND_HEIGHT = 22
OUTLINE = (30, 30, 30)

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 160, 60),
    "blue": (40, 80, 220),
    "yellow": (240, 210, 30),
    "purple": (140, 60, 170),
    "orange": (245, 140, 30),
}
SHAPES: list[str] = ["circle", "square", "triangle", "star"]

# name -> (sky/background, ground band). Mid-tone and saturated, far from white: at the tiny judge's 56-pixel
# tiles a pale scene and a blank (white) picture look nearly alike, and a judge could not learn to tell them.
SCENES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "sunny meadow": ((95, 160, 230), (70, 150, 60)),
    "sandy beach": ((60, 140, 210), (215, 180, 110)),
    "snowy field": ((120, 130, 170), (200, 205, 220)),
    "quiet garden": ((120, 175, 120), (140, 100, 60)),
}
TABLE_SCENE = ("wooden table", ((170, 120, 70), (120, 80, 45)))
JARRING_SCENES: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "black": ((15, 15, 15), (15, 15, 15)),
    "hot pink": ((255, 40, 190), (255, 40, 190)),
    "cyan": ((0, 240, 240), (0, 240, 240)),
}
CHART_BG = (250, 250, 250)
GRID = (222, 222, 222)

OWNED_IMAGE = re.compile(r"^(sa|pbl|msr)-\d+-(q\d+|r\d+-\d+)\.png$")


def _shape_points(shape: str, cx: float, cy: float, r: float) -> list[tuple[int, int]]:
    if shape == "triangle":
        return [(round(cx), round(cy - r)), (round(cx + r), round(cy + r)), (round(cx - r), round(cy + r))]
    # five-pointed star: alternate outer and inner radius, point up
    pts = []
    for k in range(10):
        rad = r if k % 2 == 0 else r * 0.45
        ang = -math.pi / 2 + k * math.pi / 5
        pts.append((round(cx + rad * math.cos(ang)), round(cy + rad * math.sin(ang))))
    return pts


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, colour: str) -> None:
    fill = COLOURS[colour]
    box = [round(cx - r), round(cy - r), round(cx + r), round(cy + r)]
    if shape == "circle":
        draw.ellipse(box, fill=fill, outline=OUTLINE)
    elif shape == "square":
        draw.rectangle(box, fill=fill, outline=OUTLINE)
    else:
        draw.polygon(_shape_points(shape, cx, cy, r), fill=fill, outline=OUTLINE)


def _scene_canvas(colours: tuple[tuple[int, int, int], tuple[int, int, int]]) -> Image.Image:
    sky, ground = colours
    img = Image.new("RGB", IMAGE_SIZE, sky)
    w, h = IMAGE_SIZE
    ImageDraw.Draw(img).rectangle([0, h - GROUND_HEIGHT, w, h], fill=ground)
    return img


def _layout(kind: str, count: int, rng: random.Random) -> tuple[list[tuple[float, float]], float]:
    """Centres and radius for ``count`` objects in a layout."""
    w, h = IMAGE_SIZE
    if kind == "row":
        r = min(13.0, (w - 8) / (count * 2.5))
        step = (w - 8) / count
        return [(4 + step * (i + 0.5), 46.0) for i in range(count)], r
    if kind == "column":
        r = min(10.0, (h - 8) / (count * 2.4))
        step = (h - 8) / count
        return [(w / 2, 4 + step * (i + 0.5)) for i in range(count)], r
    if kind == "two_rows":
        top = (count + 1) // 2
        r = min(11.0, (w - 8) / (top * 2.6))
        step = (w - 8) / top
        pts = [(4 + step * (i + 0.5), 28.0) for i in range(top)]
        bottom = count - top
        off = (w - step * bottom) / 2
        pts += [(off + step * (i + 0.5), 60.0) for i in range(bottom)]
        return pts, r
    # loose: distinct random cells of a 4x3 grid, jittered
    cells = rng.sample(range(12), count)
    pts = []
    for c in cells:
        col, row = c % 4, c // 4
        pts.append((16 + 32 * col + rng.randint(-3, 3), 14 + 24 * row + rng.randint(-2, 2)))
    return pts, 9.0


def _degrade(img: Image.Image, rng: random.Random) -> None:
    """Smear a picture: thick grey scribbles and a blotch (flat colours, still compressible)."""
    d = ImageDraw.Draw(img)
    w, h = IMAGE_SIZE
    for _ in range(3):
        d.line(
            [(rng.randint(0, w), rng.randint(0, h)), (rng.randint(0, w), rng.randint(0, h))],
            fill=(110, 110, 110),
            width=5,
        )
    x, y = rng.randint(10, w - 40), rng.randint(10, h - 40)
    d.ellipse([x, y, x + 34, y + 26], fill=(140, 140, 140))


def _draw_objects(
    scene: tuple[tuple[int, int, int], tuple[int, int, int]],
    colour: str,
    shape: str,
    count: int,
    layout: str,
    rng: random.Random,
    degraded: bool = False,
) -> Image.Image:
    img = _scene_canvas(scene)
    d = ImageDraw.Draw(img)
    pts, r = _layout(layout, count, rng)
    for cx, cy in pts:
        _draw_shape(d, shape, cx, cy, r, colour)
    if degraded:
        _degrade(img, rng)
    return img


def _draw_groups(values: list[int], colour: str, shape: str) -> Image.Image:
    img = Image.new("RGB", IMAGE_SIZE, CHART_BG)
    d = ImageDraw.Draw(img)
    w, h = IMAGE_SIZE
    g = len(values)
    width = (w - 4) / g
    for i, v in enumerate(values):
        x0 = 2 + i * width
        d.rectangle([round(x0 + 2), 3, round(x0 + width - 3), h - 4], outline=(150, 150, 150))
        for k in range(v):
            _draw_shape(d, shape, x0 + width / 2, 13 + 17 * k, 6, colour)
    return img


def _draw_bars(values: list[int], colours: list[str]) -> Image.Image:
    img = Image.new("RGB", IMAGE_SIZE, CHART_BG)
    d = ImageDraw.Draw(img)
    w, h = IMAGE_SIZE
    base, unit, left = h - 8, 12, 12
    for k in range(1, 7):
        d.line([(left, base - k * unit), (w - 4, base - k * unit)], fill=GRID)
    d.line([(left, 4), (left, base)], fill=OUTLINE)
    d.line([(left, base), (w - 4, base)], fill=OUTLINE)
    slot = (w - 4 - left) / len(values)
    for i, v in enumerate(values):
        x0 = left + i * slot + slot * 0.2
        d.rectangle([round(x0), base - v * unit, round(x0 + slot * 0.6), base - 1], fill=COLOURS[colours[i]])
    return img


def _png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
