"""What an image file says about its size, read from its bytes before any pixel is decoded.

A judge reads PNG, JPEG, GIF, WebP and BMP (:data:`ALLOWED_FORMATS`); nothing else reaches a decoder. An
image's header can lie about what decoding it will cost: an ICO whose directory says 16x16 holds a
9459x9459 PNG, a GIF whose screen is 16x16 draws a frame of 10000x10000 (Pillow grows the image to fit
it), an animated WebP or PNG declares a small first frame and a huge later one, a PNG's compressed data can
be far larger than its pixels could need. :func:`frame_sizes` walks each allowed format's own structure
(chunks, blocks, markers; never the compressed data) and returns the size of every frame or canvas a
decoder could allocate, so the caller checks every one against its pixel cap before Pillow opens the file.
A structure that does not parse is a :class:`HeaderError`: such a file is refused, not decoded to see.
"""

from __future__ import annotations

import struct

#: Pillow's format names a judge reads (a JPEG with more pictures after the first, as phones write, opens
#: through Pillow's JPEG plugin as MPO; its first picture is the one decoded).
ALLOWED_FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP")
#: How the allowed formats are named to a user.
ALLOWED_NAMES = "PNG, JPEG, GIF, WebP or BMP"


class HeaderError(ValueError):
    """The bytes are not an image of an allowed format, or its structure does not parse."""


class UnknownFormat(HeaderError):
    """The bytes are none of the allowed formats."""


class Oversized(HeaderError):
    """More compressed data than the declared pixels could need: a decompression bomb, not an image."""


def sniff_format(data: bytes) -> str | None:
    """The allowed format ``data`` starts as (Pillow's name), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    if data[:2] == b"BM":
        return "BMP"
    return None


def frame_sizes(data: bytes) -> list[tuple[int, int]]:
    """(width, height) of every frame or canvas a decoder of ``data`` may allocate, from the file's own
    structure alone. Raises :class:`HeaderError` for bytes that are not an allowed format or whose
    structure is broken (a truncated header, a chunk running past the end)."""
    fmt = sniff_format(data)
    if fmt is None:
        raise UnknownFormat(f"not a {ALLOWED_NAMES} file")
    try:
        return _READERS[fmt](data)
    except (struct.error, IndexError):
        raise HeaderError(f"its {fmt} header is truncated") from None


def _png(data: bytes) -> list[tuple[int, int]]:
    sizes: list[tuple[int, int]] = []
    pos, idat, raw_bound = 8, 0, 0
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if len(body) < length:
            raise HeaderError(f"its PNG chunk {kind!r} runs past the end of the file")
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            sizes.append((w, h))
            channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(colour, 4)
            # Every row is a filter byte and its samples: what the compressed data decompresses to (an
            # interlaced image has up to 15 short rows more per 8 rows, each with its filter byte).
            raw_bound = h * (3 + (w * channels * depth + 7) // 8)
        elif kind == b"fcTL":  # an APNG frame
            sizes.append(struct.unpack(">II", body[4:12]))
        elif kind == b"IDAT":
            idat += length
        elif kind == b"IEND":
            break
        pos += 12 + length
    if not sizes:
        raise HeaderError("its PNG header (IHDR) is missing")
    # zlib's worst case (stored blocks) adds 5 bytes per 16 kB and a few bytes of framing; more
    # compressed data than that cannot be honest pixel data of this size.
    if idat > raw_bound + raw_bound // 3000 + 1024:
        raise Oversized(
            f"its PNG data is {idat:,} bytes, more than a {sizes[0][0]}x{sizes[0][1]} image can hold"
        )
    return sizes


#: JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic); not DHT (C4), JPG (C8), DAC (CC).
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> list[tuple[int, int]]:
    # The first picture's segments up to its scan data; a decoder reads this picture alone (a thumbnail
    # inside an APP segment is skipped with it, and an MPO's later pictures are never decoded here).
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            raise HeaderError("its JPEG markers are broken")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            pos += 2
            continue
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return [(w, h)]
        if marker == 0xDA:
            break
        pos += 2 + length
    raise HeaderError("its JPEG frame header (SOF) is missing")


def _gif(data: bytes) -> list[tuple[int, int]]:
    w, h, flags = struct.unpack("<HHB", data[6:11])
    sizes = [(w, h)]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while pos < len(data):
        block = data[pos]
        if block == 0x3B:  # trailer
            break
        if block == 0x21:  # extension: label, then data sub-blocks
            pos = _skip_sub_blocks(data, pos + 2)
        elif block == 0x2C:  # image descriptor: a frame at (left, top), drawn on a canvas grown to hold it
            left, top, fw, fh, fflags = struct.unpack("<HHHHB", data[pos + 1 : pos + 10])
            sizes.append((left + fw, top + fh))
            pos += 10 + (3 << ((fflags & 7) + 1) if fflags & 0x80 else 0)
            pos = _skip_sub_blocks(data, pos + 1)  # after the LZW code size byte
        else:
            raise HeaderError(f"its GIF block 0x{block:02x} is not a GIF block")
    return sizes


def _skip_sub_blocks(data: bytes, pos: int) -> int:
    while True:
        n = data[pos]
        pos += 1 + n
        if n == 0:
            return pos


def _webp(data: bytes) -> list[tuple[int, int]]:
    return _riff_chunks(data, 12, min(len(data), 8 + struct.unpack("<I", data[4:8])[0]))


def _riff_chunks(data: bytes, pos: int, end: int) -> list[tuple[int, int]]:
    sizes: list[tuple[int, int]] = []
    while pos + 8 <= end:
        kind, length = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = data[pos + 8 : pos + 8 + length]
        if len(body) < length:
            raise HeaderError(f"its WebP chunk {kind!r} runs past the end of the file")
        if kind == b"VP8X":  # the canvas
            sizes.append((_u24(body, 4) + 1, _u24(body, 7) + 1))
        elif kind == b"ANMF":  # a frame: its own rectangle, then its own image chunks
            sizes.append((_u24(body, 6) + 1, _u24(body, 9) + 1))
            sizes += _riff_chunks(body, 16, len(body))
        elif kind == b"VP8 ":
            w, h = struct.unpack("<HH", body[6:10])
            sizes.append((w & 0x3FFF, h & 0x3FFF))
        elif kind == b"VP8L":
            (bits,) = struct.unpack("<I", body[1:5])
            sizes.append(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        pos += 8 + length + (length & 1)
    if not sizes:
        raise HeaderError("its WebP image chunk is missing")
    return sizes


def _u24(b: bytes, at: int) -> int:
    return b[at] | b[at + 1] << 8 | b[at + 2] << 16


def _bmp(data: bytes) -> list[tuple[int, int]]:
    (header,) = struct.unpack("<I", data[14:18])
    if header == 12:  # OS/2 1.x
        w, h = struct.unpack("<HH", data[18:22])
    else:
        w, h = struct.unpack("<ii", data[18:26])
    return [(abs(w), abs(h))]


_READERS = {"PNG": _png, "JPEG": _jpeg, "GIF": _gif, "WEBP": _webp, "BMP": _bmp}

__all__ = [
    "ALLOWED_FORMATS",
    "ALLOWED_NAMES",
    "HeaderError",
    "Oversized",
    "UnknownFormat",
    "frame_sizes",
    "sniff_format",
]
