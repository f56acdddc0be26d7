"""Hand-made image files whose headers lie about what decoding them costs, for the tests and for
``scripts/bench_attacks.py``: each is a few kB to a few hundred kB on disk and would cost a decoder far more.

* :func:`ico_with_huge_png`: an ICO whose directory says 16x16, holding a PNG of ``side`` x ``side``
  (Pillow decodes it inside ``Image.open``); :func:`cur_with_huge_png` the same as a cursor.
* :func:`gif_with_huge_frame`: a 16x16 GIF whose second frame is ``side`` x ``side``.
* :func:`webp_with_huge_frame`: an animated 16x16 WebP whose second frame says ``side`` x ``side``.
* :func:`apng_with_huge_frame`: a 16x16 PNG whose animation's second frame says ``side`` x ``side``.
* :func:`png_with_oversized_idat`: a 1x1 PNG carrying ``size`` bytes of compressed data.
* :func:`tiff_multipage`: a multi-page TIFF (a format a judge does not read at all).

Every structure is written by hand from the formats' specifications, so the files are exactly what they
claim to be, lies included.
"""

from __future__ import annotations

import io
import os
import struct
import zlib


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_of_zeros(width: int, height: int) -> bytes:
    """A black RGB PNG of any size, compressed row by row (never held whole in memory)."""
    comp = zlib.compressobj(1)
    row = b"\x00" * (1 + 3 * width)
    data = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def ico_with_huge_png(side: int = 9459, kind: int = 1) -> bytes:
    png = png_of_zeros(side, side)
    header = struct.pack("<HHH", 0, kind, 1)
    entry = struct.pack("<BBBBHHII", 16, 16, 0, 0, 1, 32, len(png), 6 + 16)
    return header + entry + png


def cur_with_huge_png(side: int = 9459) -> bytes:
    return ico_with_huge_png(side, kind=2)


def _gif_frame(left: int, top: int, width: int, height: int) -> bytes:
    # an image descriptor without a local colour table, LZW minimum code size 2, then one tiny data
    # sub-block (a clear code and an end code) and the block terminator
    return b"\x2c" + struct.pack("<HHHHB", left, top, width, height, 0) + b"\x02\x02\x4c\x01\x00"


def gif_with_huge_frame(side: int = 10000) -> bytes:
    head = b"GIF89a" + struct.pack("<HHBBB", 16, 16, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    return head + _gif_frame(0, 0, 16, 16) + _gif_frame(0, 0, side, side) + b"\x3b"


def _riff(chunks: bytes) -> bytes:
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WEBP" + chunks


def _webp_chunk(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("<I", len(body)) + body + (b"\x00" if len(body) & 1 else b"")


def _u24(v: int) -> bytes:
    return struct.pack("<I", v)[:3]


def webp_with_huge_frame(side: int = 10000) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16), "white").save(buf, "WEBP", lossless=True)
    small = buf.getvalue()[12:]  # the VP8L chunk of a real 16x16 image
    huge_bits = (side - 1) | (side - 1) << 14  # a VP8L header of side x side, with no image data behind it
    huge = _webp_chunk(b"VP8L", b"\x2f" + struct.pack("<I", huge_bits) + b"\x00" * 8)

    def frame(w: int, h: int, image: bytes) -> bytes:
        return _webp_chunk(
            b"ANMF", _u24(0) + _u24(0) + _u24(w - 1) + _u24(h - 1) + _u24(100) + b"\x00" + image
        )

    vp8x = _webp_chunk(b"VP8X", bytes([0x02, 0, 0, 0]) + _u24(15) + _u24(15))  # animated, 16x16 canvas
    anim = _webp_chunk(b"ANIM", b"\x00\x00\x00\x00\x00\x00")
    return _riff(vp8x + anim + frame(16, 16, small) + frame(side, side, huge))


def apng_with_huge_frame(side: int = 10000) -> bytes:
    ihdr = struct.pack(">IIBBBBB", 16, 16, 8, 2, 0, 0, 0)
    idat = zlib.compress((b"\x00" + b"\x00" * 48) * 16)  # 16 rows: a filter byte and 16 black pixels
    actl = struct.pack(">II", 2, 0)
    fctl1 = struct.pack(">IIIIIHHBB", 0, 16, 16, 0, 0, 1, 10, 0, 0)
    fctl2 = struct.pack(">IIIIIHHBB", 1, side, side, 0, 0, 1, 10, 0, 0)
    fdat = struct.pack(">I", 2) + zlib.compress(b"\x00")
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"acTL", actl)
        + _chunk(b"fcTL", fctl1)
        + _chunk(b"IDAT", idat)
        + _chunk(b"fcTL", fctl2)
        + _chunk(b"fdAT", fdat)
        + _chunk(b"IEND", b"")
    )


def png_with_oversized_idat(size: int = 4 * 1024 * 1024) -> bytes:
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    data = zlib.compress(b"\x00\x00\x00\x00") + os.urandom(size)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def tiff_multipage(pages: int = 3) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    frames = [Image.new("RGB", (32, 32), c) for c in ("red", "green", "blue")[:pages]]
    frames[0].save(buf, "TIFF", save_all=True, append_images=frames[1:])
    return buf.getvalue()


#: Each attack by name: (maker, what a server must answer: 413 over a limit, 415 a format it does not read)
BOMBS = {
    "ico_huge_png": (ico_with_huge_png, 415),
    "cur_huge_png": (cur_with_huge_png, 415),
    "gif_huge_frame": (gif_with_huge_frame, 413),
    "webp_huge_frame": (webp_with_huge_frame, 413),
    "apng_huge_frame": (apng_with_huge_frame, 413),
    "png_oversized_idat": (png_with_oversized_idat, 413),
    "tiff_multipage": (tiff_multipage, 415),
}

__all__ = ["BOMBS", "png_of_zeros"]
