"""Image references: resolution inside a root, and safe, lazy opening.

A reference in a record is a path relative to the record file's folder (or to a
``root`` the user gives). It must stay inside that root after symlinks are
resolved. URLs are refused unless the caller allows them; this module never
fetches anything by itself.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from judge.core.errors import ImageError, ImageTooLarge

URL_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://|^data:", re.ASCII)

#: Default pixel limit per image (width x height); beyond it an image is refused before decoding.
DEFAULT_MAX_PIXELS = 40_000_000
#: Default byte limit per image file.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


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
    """Resolve an image reference to an absolute path (or the URL itself, when allowed).

    Relative paths are taken from ``root`` if given, else from ``base_dir`` (the record
    file's folder); the result must lie inside that folder. Raises ``ImageError``.
    """
    if is_url(ref):
        if not allow_urls:
            raise ImageError(
                f"image {ref!r} is a URL; URLs are not fetched unless you allow them (--allow-urls)"
            )
        return ref
    anchor = Path(root if root is not None else base_dir).resolve()
    candidate = Path(ref)
    path = (candidate if candidate.is_absolute() else anchor / candidate).resolve()
    if path != anchor and anchor not in path.parents:
        raise ImageError(
            f"image path {ref!r} leaves its root {str(anchor)!r} (resolves to {str(path)!r}); "
            "keep images inside the annotation folder or pass --root"
        )
    return str(path)


def check_image_file(path: str, limits: ImageLimits = DEFAULT_LIMITS) -> tuple[int, int]:
    """Check that an image exists, is within limits and decodes fully; return (width, height).

    Decodes the whole image, so truncated files are caught, not only bad headers.
    """
    img = _decode(path, limits)
    size = img.size
    img.close()
    return size


def image_size(path: str, limits: ImageLimits = DEFAULT_LIMITS) -> tuple[int, int]:
    """(width, height) of an image from its header alone, after the existence, byte and pixel checks:
    what a service checks before it spends a full decode on an image. Raises ``ImageError``
    (``ImageTooLarge`` over a limit)."""
    img = _open_header(path, limits)
    size = img.size
    img.close()
    return size


def open_image(path: str, limits: ImageLimits = DEFAULT_LIMITS) -> Image.Image:
    """Open an image as RGB, checking existence, byte and pixel limits and full decoding."""
    img = _decode(path, limits)
    rgb = img.convert("RGB")
    if rgb is not img:
        img.close()
    return rgb


def _open_header(path: str, limits: ImageLimits) -> Image.Image:
    """The image opened lazily (header read, pixels not decoded) once it passed every check but decoding."""
    if is_url(path):
        raise ImageError(f"image {path!r} is a URL; fetching URLs is not supported here, download it first")
    if not os.path.exists(path):
        raise ImageError(f"image file {path!r} does not exist")
    if not os.path.isfile(path):
        raise ImageError(f"image path {path!r} is not a file")
    size = os.path.getsize(path)
    if size == 0:
        raise ImageError(f"image file {path!r} is empty")
    if size > limits.max_bytes:
        raise ImageTooLarge(f"image file {path!r} is {size:,} bytes, over the limit of {limits.max_bytes:,}")
    try:
        with warnings.catch_warnings():
            # PIL's own bomb guard warns before it errors; both become our error below.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageTooLarge(f"image file {path!r} refused as a decompression bomb: {e}") from None
    except Exception as e:  # PIL raises many types for unreadable files
        raise ImageError(f"image file {path!r} cannot be read as an image: {e}") from None
    w, h = img.size
    if w * h > limits.max_pixels:
        img.close()
        raise ImageTooLarge(
            f"image file {path!r} is {w}x{h} = {w * h:,} pixels, over the limit of {limits.max_pixels:,} "
            "(possible decompression bomb; raise the limit if the image is genuine)"
        )
    return img


def _decode(path: str, limits: ImageLimits) -> Image.Image:
    img = _open_header(path, limits)
    try:
        img.load()
    except Exception as e:
        img.close()
        raise ImageError(f"image file {path!r} is truncated or corrupt: {e}") from None
    return img
