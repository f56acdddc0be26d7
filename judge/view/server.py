"""``judge-view RUN``: the site of :mod:`judge.view.site`, served on loopback.

The site's files are served from memory, by exact path (no path on disk is derived from a request for
them). Images are served from the run's image roots only: ``img/<root>/<path>.webp`` is resolved inside
root ``<root>`` by :func:`judge.core.images.resolve_image` (the check ``judge-serve`` and the file readers
use: a path that leaves its root, through ``..`` or a symlink, is refused) and opened by
:func:`judge.core.images.open_image` (byte and pixel limits, a full decode), then sent as a thumbnail: a
file that is not an image is never sent, whatever its name.

Before any file or image, every request passes :class:`judge.core.hosts.HostPolicy` (the check
``judge-serve`` makes): a Host that is not a loopback name or an ``--allowed-host`` is a 421, a foreign
Origin or a cross-site load (``Sec-Fetch-Site``) a 403, so a page whose name is rebound to 127.0.0.1 (DNS
rebinding), or one that includes ``data/index.js`` as a script, reads nothing.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Sequence
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from judge.core.errors import ImageError
from judge.core.hosts import HostPolicy
from judge.view.load import ViewData
from judge.view.site import IMAGE_SUFFIX, site_files, thumbnail

logger = logging.getLogger(__name__)

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".webp": "image/webp",
}
#: what the pages may load: this server's own files, nothing else
CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
#: thumbnails kept in memory (each a few kB)
CACHED_IMAGES = 4096


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, view: ViewData, side: int, address: tuple[str, int], allowed_hosts: Sequence[str] = ()
    ):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.hosts = HostPolicy(address[0], allowed_hosts)
        self.view, self.side = view, side
        self.files = site_files(view)
        self.image = lru_cache(maxsize=CACHED_IMAGES)(self._image)
        super().__init__(address, _Handler)

    def _image(self, root: int, rel: str) -> bytes:
        return thumbnail(self.view.roots.resolve(root, rel), self.side)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        logger.debug("judge-view: " + format % args)

    def parse_request(self) -> bool:
        # Every method, before its handler: a foreign Host or Origin (DNS rebinding, another site's page).
        if not super().parse_request():
            return False
        headers = {k.lower(): self.headers.get_all(k, []) for k in set(self.headers.keys())}
        refusal = self.server.hosts.refusal(self.command, headers)
        if refusal is not None:
            self.close_connection = True
            self._error(HTTPStatus(refusal.status), refusal.message)
            return False
        return True

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        path = unquote(urlsplit(self.path).path).lstrip("/") or "index.html"
        body = self.server.files.get(path)
        if body is None and path.startswith("img/") and path.endswith(IMAGE_SUFFIX):
            body = self._image(path)
            if body is None:
                return
        if body is None:
            return self._error(HTTPStatus.NOT_FOUND, f"no such file in this view: {path}")
        suffix = path[path.rfind(".") :] if "." in path else ""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", TYPES.get(suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        # Another site's page may not embed what it could not fetch (a browser without Fetch Metadata).
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _image(self, path: str) -> bytes | None:
        root, _, rel = path.removeprefix("img/").removesuffix(IMAGE_SUFFIX).partition("/")
        if not root.isdigit() or not rel:
            self._error(HTTPStatus.NOT_FOUND, f"no such image: {path}")
            return None
        try:
            return self.server.image(int(root), rel)
        except ImageError as e:
            # Outside the run's image roots, missing or not an image: the same answer, the reason logged.
            logger.info(f"judge-view: image {path!r} refused: {e}")
            self._error(HTTPStatus.NOT_FOUND, f"no such image: {path}")
            return None

    def _error(self, code: HTTPStatus, text: str) -> None:
        body = text.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)


def make_server(
    view: ViewData, host: str, port: int, side: int, allowed_hosts: Sequence[str] = ()
) -> ViewServer:
    """The server, bound (``port`` 0: a free port) but not yet serving. It answers requests naming a
    loopback name, ``host`` or one of ``allowed_hosts`` only (:mod:`judge.core.hosts`)."""
    return ViewServer(view, side, (host, port), allowed_hosts)


def serve_in_thread(server: ViewServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="judge-view", daemon=True)
    thread.start()
    return thread
