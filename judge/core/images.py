"""Image references: resolution inside a root, and opening what was checked.

A reference in a record is a path relative to the record file's folder (or to a ``root`` the user gives).
:func:`resolve_image` turns it into the file's real path, walking it one name at a time beneath the root
(:func:`resolve_beneath`): a ``..`` or a symbolic link that would leave the root refuses the reference at
that step, before anything outside the root is looked at, so the answer never depends on what the disk
holds outside it. A loop, a name the process may not look up, a NUL byte: refused the same way. URLs are
refused unless the caller allows them; this module never fetches anything.

Every image is then read by :func:`read_image_bytes`, the one place that opens an image file: it follows
the resolved path one folder at a time from a descriptor, refusing any symbolic link on the way
(``O_NOFOLLOW``), checks the opened descriptor is a regular file within the byte limit, and reads its bytes
from that descriptor. A resolved path has no links, so a folder swapped for a link after the check makes the
open fail instead of reading what the link points to. Decoding works on those bytes: only the formats of
:data:`~judge.core.image_headers.ALLOWED_FORMATS`, and only after the size of every frame the file declares
(:func:`~judge.core.image_headers.frame_sizes`) passed the pixel cap. Hard links cannot be told apart from
the file itself by any path check: a root that untrusted users can write into should be a read-only mount
or hold no hard links to files elsewhere.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import warnings
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from judge.core.errors import ImageError, ImageTooLarge, PathRefused, UnsupportedImage
from judge.core.image_headers import (
    ALLOWED_FORMATS,
    ALLOWED_NAMES,
    HeaderError,
    Oversized,
    UnknownFormat,
    frame_sizes,
)

URL_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://|^data:", re.ASCII)

#: Default pixel limit per image (width x height); beyond it an image is refused before decoding.
DEFAULT_MAX_PIXELS = 40_000_000
#: Default byte limit per image file.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Symbolic links followed while resolving one reference (Linux's own limit); more is taken for a loop.
MAX_LINKS = 40


@dataclass(frozen=True)
class ImageLimits:
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_bytes: int = DEFAULT_MAX_BYTES


DEFAULT_LIMITS = ImageLimits()


def is_url(ref: str) -> bool:
    return bool(URL_RE.match(ref))


def resolve_image(
    ref: str, base_dir: str | Path, *, root: str | Path | None = None, allow_urls: bool = False
) -> str:
    """Resolve an image reference to the real path of its file (or the URL itself, when allowed).

    Relative paths are taken from ``root`` if given, else from ``base_dir`` (the record file's folder); an
    absolute path must name a place under that folder. The path is resolved beneath it
    (:func:`resolve_beneath`). Raises :class:`PathRefused` (an ``ImageError``) naming the reference and the
    root, whatever the reason, or ``ImageError`` for a URL that is not allowed.
    """
    if is_url(ref):
        if not allow_urls:
            raise ImageError(
                f"image {ref!r} is a URL; URLs are not fetched unless you allow them (--allow-urls)"
            )
        return ref
    given = os.path.abspath(root if root is not None else base_dir)
    try:
        return resolve_beneath(given, ref)
    except PathRefused:
        raise PathRefused(
            f"image path {ref!r} leaves its root {given!r} or cannot be followed beneath it ('..', an "
            "absolute path or a symbolic link out of it, a loop, no permission); keep images inside the "
            "annotation folder or pass --root"
        ) from None


def resolve_beneath(root: str, ref: str) -> str:
    """The real path of ``ref`` taken from folder ``root``, resolved one name at a time without ever
    looking outside ``root``: ``..`` above the root, an absolute path or a symbolic link whose target is not
    under the root, more than :data:`MAX_LINKS` links (a loop), a name that cannot be looked up (no
    permission, a NUL byte, not encodable) all raise :class:`PathRefused`, with a message that names none
    of them. A name that does not exist ends the walk: the rest of ``ref`` is kept as written (still inside
    the root), and opening it reports the file missing."""
    real_root = os.path.realpath(root)
    anchors = tuple(dict.fromkeys((real_root, os.path.abspath(root))))
    try:
        todo = deque(_under(ref, anchors).split("/"))
    except ValueError:
        raise PathRefused(f"{ref!r} is not under {root!r}") from None
    done: list[str] = []
    links = 0
    while todo:
        name = todo.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            if not done:
                raise PathRefused(f"{ref!r} leaves {root!r}")
            done.pop()
            continue
        here = os.path.join(real_root, *done, name)
        try:
            st = os.lstat(here)
        except (FileNotFoundError, NotADirectoryError):
            return _lexical(real_root, done, [name, *todo], ref, root)
        except (OSError, ValueError):  # no permission, name too long, NUL byte, a lone surrogate...
            raise PathRefused(f"{ref!r} cannot be followed under {root!r}") from None
        if not stat.S_ISLNK(st.st_mode):
            done.append(name)
            continue
        links += 1
        try:
            if links > MAX_LINKS:
                raise ValueError("a loop")
            target = os.readlink(here)
            if os.path.isabs(target):
                target, done = _under(target, anchors), []
        except (OSError, ValueError):
            raise PathRefused(f"{ref!r} cannot be followed under {root!r}") from None
        todo.extendleft(reversed(target.split("/")))
    return os.path.join(real_root, *done)


def _under(path: str, anchors: tuple[str, ...]) -> str:
    """``path`` relative to the first of ``anchors`` it lies under, by its text alone (an absolute path is
    never looked up: ``/proc/<pid>/root/...`` must answer as any other path out); raises ValueError."""
    if "\x00" in path:
        raise ValueError("NUL")
    if not os.path.isabs(path):
        return path
    for anchor in anchors:
        if path == anchor or path.startswith(anchor.rstrip("/") + "/"):
            return path[len(anchor) :]
    raise ValueError("outside")


def _lexical(real_root: str, done: list[str], rest: list[str], ref: str, root: str) -> str:
    """The rest of a path below a name that does not exist, by its text (nothing there to look up)."""
    parts = list(done)
    for name in rest:
        if name == "..":
            if not parts:
                raise PathRefused(f"{ref!r} leaves {root!r}")
            parts.pop()
        elif name not in ("", "."):
            parts.append(name)
    return os.path.join(real_root, *parts)


# ----------------------------------------------------------------------------- opening


def read_image_bytes(path: str, limits: ImageLimits = DEFAULT_LIMITS) -> bytes:
    """The bytes of image file ``path`` (a resolved path: :func:`resolve_image`'s result), read from a
    descriptor opened without following any symbolic link on the way, once it is known to be a regular
    file within ``limits.max_bytes``. Raises ``ImageError`` (``ImageTooLarge`` over the byte limit)."""
    if is_url(path):
        raise ImageError(f"image {path!r} is a URL; fetching URLs is not supported here, download it first")
    try:
        fd = _open_nofollow(path)
    except (FileNotFoundError, NotADirectoryError):
        raise ImageError(f"image file {path!r} does not exist") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ImageError(
                f"image file {path!r} is reached through a symbolic link, which is not followed when an image "
                "is opened (its path was not resolved, or it changed after it was checked)"
            ) from None
        raise ImageError(f"image file {path!r} cannot be opened: {e.strerror}") from None
    except ValueError:  # a NUL byte or an unencodable name
        raise ImageError(f"image file {path!r} is not a valid file name") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ImageError(f"image path {path!r} is not a file")
        if st.st_size == 0:
            raise ImageError(f"image file {path!r} is empty")
        if st.st_size > limits.max_bytes:
            raise ImageTooLarge(
                f"image file {path!r} is {st.st_size:,} bytes, over the limit of {limits.max_bytes:,}"
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limits.max_bytes + 1)
    except OSError as e:
        raise ImageError(f"image file {path!r} cannot be read: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limits.max_bytes:  # it grew after the check
        raise ImageTooLarge(f"image file {path!r} is over the limit of {limits.max_bytes:,} bytes")
    return data


def _open_nofollow(path: str) -> int:
    """A read-only descriptor of ``path``, walked from ``/`` (or the working folder) one name at a time,
    each folder opened relative to the last with ``O_NOFOLLOW``: a symbolic link anywhere raises ELOOP.
    Non-blocking, so a FIFO cannot hang the caller (it is then refused as not a regular file)."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not nofollow or os.open not in os.supports_dir_fd:  # not POSIX: no descriptor-relative walk
        return os.open(path, flags)
    names = [n for n in path.split("/") if n not in ("", ".")]
    if ".." in names:
        raise OSError(errno.ELOOP, "'..' in a resolved path")
    if not names:
        raise IsADirectoryError(errno.EISDIR, "a folder")
    folder_flags = flags | os.O_DIRECTORY | nofollow
    fd = os.open("/" if path.startswith("/") else ".", folder_flags)
    try:
        for name in names[:-1]:
            try:
                nxt = os.open(name, folder_flags, dir_fd=fd)
            except NotADirectoryError:  # a link (O_NOFOLLOW with O_DIRECTORY) or a file on the way
                if stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode):
                    raise OSError(errno.ELOOP, "a symbolic link on the way") from None
                raise
            os.close(fd)
            fd = nxt
        return os.open(names[-1], flags | nofollow | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0), dir_fd=fd)
    finally:
        os.close(fd)


def _open_header(path: str, limits: ImageLimits, data: bytes | None = None) -> tuple[Image.Image, int, int]:
    """The image opened lazily (header read, pixels not decoded) once it passed every check but decoding,
    and the width and height of the largest frame it declares: its bytes read safely
    (:func:`read_image_bytes`, unless given), its format allowed, every frame within the pixel cap, then
    Pillow's own decompression-bomb guard."""
    if data is None:
        data = read_image_bytes(path, limits)
    try:
        sizes = frame_sizes(data)
    except UnknownFormat as e:
        raise UnsupportedImage(f"image file {path!r} cannot be read as an image: {e}") from None
    except Oversized as e:
        raise ImageTooLarge(f"image file {path!r} refused as a decompression bomb: {e}") from None
    except HeaderError as e:
        raise ImageError(f"image file {path!r} is truncated or corrupt: {e}") from None
    w, h = max(sizes, key=lambda wh: wh[0] * wh[1])
    _check_pixels(path, w, h, limits)
    try:
        with warnings.catch_warnings():
            # PIL's own bomb guard warns before it errors; both become our error below.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageTooLarge(f"image file {path!r} refused as a decompression bomb: {e}") from None
    except Exception as e:  # PIL raises many types for unreadable files
        raise ImageError(f"image file {path!r} cannot be read as a {ALLOWED_NAMES} image: {e}") from None
    if img.width * img.height > w * h:  # Pillow saw more than the structure said: go by the larger
        w, h = img.size
        try:
            _check_pixels(path, w, h, limits)
        except ImageTooLarge:
            img.close()
            raise
    return img, w, h


def _check_pixels(path: str, w: int, h: int, limits: ImageLimits) -> None:
    if w * h > limits.max_pixels:
        raise ImageTooLarge(
            f"image file {path!r} is {w}x{h} = {w * h:,} pixels, over the limit of {limits.max_pixels:,} "
            "(possible decompression bomb; raise the limit if the image is genuine)"
        )


def _decode(path: str, limits: ImageLimits, data: bytes | None = None) -> Image.Image:
    img, _, _ = _open_header(path, limits, data)
    try:
        img.load()
    except Exception as e:
        img.close()
        raise ImageError(f"image file {path!r} is truncated or corrupt: {e}") from None
    return img


def check_image_file(path: str, limits: ImageLimits = DEFAULT_LIMITS) -> tuple[int, int]:
    """Check that an image exists, is within limits and decodes fully; return (width, height).

    Decodes the whole image, so truncated files are caught, not only bad headers.
    """
    img = _decode(path, limits)
    size = img.size
    img.close()
    return size


def image_size(
    path: str, limits: ImageLimits = DEFAULT_LIMITS, *, data: bytes | None = None
) -> tuple[int, int]:
    """(width, height) of an image's largest frame (its canvas, for most files) from its header and
    structure alone, after the existence, byte, format and pixel checks: what a service checks before it
    spends a full decode on an image. ``data``: the file's bytes, when the caller holds them already.
    Raises ``ImageError`` (``ImageTooLarge`` over a limit, ``UnsupportedImage`` for a format a judge does
    not read)."""
    img, w, h = _open_header(path, limits, data)
    img.close()
    return w, h


def open_image(path: str, limits: ImageLimits = DEFAULT_LIMITS, *, data: bytes | None = None) -> Image.Image:
    """Open an image as RGB: read safely (:func:`read_image_bytes`, unless its ``data`` is given), its
    format allowed, every frame within the pixel cap, decoded in full."""
    img = _decode(path, limits, data)
    rgb = img.convert("RGB")
    if rgb is not img:
        img.close()
    return rgb


__all__ = [
    "DEFAULT_LIMITS",
    "ImageLimits",
    "check_image_file",
    "image_size",
    "is_url",
    "open_image",
    "read_image_bytes",
    "resolve_beneath",
    "resolve_image",
]
