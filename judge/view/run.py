"""What ``judge-view`` does: read the run, then write the static site (``export``) or serve it on loopback."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from judge.core.errors import JudgeError
from judge.view.config import ViewConfig
from judge.view.load import ViewData, load_view
from judge.view.site import export_site

logger = logging.getLogger(__name__)


@dataclass
class ViewResult:
    view: ViewData
    seconds: float  #: reading the run (and writing the site, on export)
    export_dir: str | None = None
    counts: dict[str, int] = field(default_factory=dict)  #: files, images, images not shown (export)
    url: str | None = None  #: where it was served


def view_run(cfg: ViewConfig, *, on_ready: Callable[[str], None] | None = None) -> ViewResult:
    """Read ``cfg.run``; with ``cfg.export`` write the site and return, else serve it until interrupted
    (``on_ready(url)`` is called once it listens). Raises :class:`JudgeError` on bad input or options."""
    t0 = time.perf_counter()
    view = load_view(cfg)
    if cfg.export is not None:
        counts = export_site(view, cfg.export, side=cfg.thumbnail, overwrite=cfg.overwrite)
        return ViewResult(view, time.perf_counter() - t0, str(Path(cfg.export)), counts)
    from judge.view.server import make_server

    try:
        server = make_server(view, cfg.host, cfg.port, cfg.thumbnail, cfg.allowed_host)
    except OSError as e:
        raise JudgeError(
            f"cannot listen on {cfg.host}:{cfg.port} (`host`, `port`): {e.strerror or e}"
        ) from None
    result = ViewResult(view, time.perf_counter() - t0, url=server.url)
    if on_ready is not None:
        on_ready(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return result
