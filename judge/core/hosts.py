"""Which requests a local server answers at all: the Host, Origin and Content-Type checks that
``judge-serve`` and ``judge-view`` share (DNS rebinding and cross-site requests).

A web page can make the browser send requests to a server on loopback: after a DNS rebinding the page's own
name (``attacker.example``) points at 127.0.0.1, so the browser sends ``Host: attacker.example``; and any
page can post a "simple" cross-site request (``Content-Type: text/plain``) without a CORS preflight. So a
:class:`HostPolicy` refuses, before any route runs:

* a ``Host`` that is not a name the server serves: 421 (Misdirected Request); a request without one, or with
  several, 400. Served are loopback names (``localhost`` and the loopback addresses, 127.0.0.0/8 and ``::1``,
  with any port), the address the server is bound to (bound to a wildcard, 0.0.0.0 or ``::``: any IP
  address literal, which no DNS answer can rebind), and each ``--allowed-host``;
* an ``Origin`` header (a browser's cross-origin request, or a POST) whose host is not one of those, and the
  opaque origin ``null``: 403;
* a request that the browser marks as made by another site's page (``Sec-Fetch-Site: cross-site``), a
  link the user followed aside: 403. A ``<script src>`` sends no Origin, and judge-view's data files are
  scripts;
* a POST, PUT or PATCH that carries a body not declared ``application/json`` (parameters such as
  ``charset`` aside): 415 naming the type sent. Only such bodies are JSON to the routes, and a browser sends
  them cross-site only after a CORS preflight, which no answer here grants.

No CORS headers are ever sent, so a page on another origin cannot read an answer either. The servers render
a :class:`Refusal` in their own error shape: :class:`HostGuard` is the ASGI middleware (judge-serve),
``judge.view.server`` calls :meth:`HostPolicy.refusal` itself (``http.server``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator

#: The option's help, the same on both commands.
ALLOWED_HOST_HELP = (
    "another name this server answers to in the Host header, besides loopback names and the bound address: "
    "NAME or NAME:PORT (a DNS name or an IP address, IPv6 in brackets; with a port, only that port), e.g. the "
    "public name a reverse proxy forwards (repeatable; no wildcards: `*` is refused). Requests naming any "
    "other host get 421, those from a page on another origin 403"
)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
JSON = "application/json"
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: its status, a message naming the header, an error code."""

    status: int
    message: str
    code: str
    header: str


@dataclass(frozen=True)
class _Entry:
    name: str  #: lower case, IPv6 without brackets
    port: int | None  #: None: any port


def parse_allowed_host(value: str) -> str:
    """``value`` (an ``--allowed-host``) in its normal form, ``name`` or ``name:port``; ValueError naming
    the option and what is wrong otherwise."""
    entry = _entry(value)
    if isinstance(entry, str):
        raise ValueError(f"`allowed_host` {value!r}: {entry}")
    return _show(entry)


#: The type of a config's ``allowed_host`` field (judge-serve's and judge-view's): one name or a list, each
#: checked and normalised by :func:`parse_allowed_host`.
AllowedHosts = Annotated[
    list[str],
    BeforeValidator(lambda v: [v] if isinstance(v, str) else v),
    AfterValidator(lambda v: [parse_allowed_host(x) for x in v]),
]


class HostPolicy:
    """The hosts one server answers to: ``HostPolicy("127.0.0.1", ["judge.example.org"])``."""

    def __init__(self, bound: str, allowed: Iterable[str] = ()):
        self.entries: list[_Entry] = []
        self.any_ip = False  #: bound to a wildcard: every address of the machine is served, so any IP literal
        bound_entry = _entry(bound)
        if isinstance(bound_entry, _Entry) and bound_entry.name != "localhost":
            ip = _ip(bound_entry.name)
            self.any_ip = ip is not None and ip.is_unspecified
            if ip is None or not (ip.is_loopback or ip.is_unspecified):
                self.entries.append(_Entry(bound_entry.name, None))
        for value in allowed:
            entry = _entry(value)
            if isinstance(entry, str):
                raise ValueError(f"`allowed_host` {value!r}: {entry}")
            self.entries.append(entry)
        # Each request names the same few hosts: their answers are kept (parsing costs tens of microseconds).
        self._host_ok = lru_cache(maxsize=1024)(self._host_allowed)
        self._origin_ok = lru_cache(maxsize=1024)(self._origin_allowed)

    def serves(self, name: str, port: int | None) -> bool:
        """Whether a request for ``name`` (lower case, IPv6 without brackets) on ``port`` is this server's."""
        ip = _ip(name)
        if ip is not None and (ip.is_loopback or self.any_ip):
            return True
        return name == "localhost" or any(e.name == name and e.port in (None, port) for e in self.entries)

    def refusal(self, method: str, headers: Mapping[str, list[str]]) -> Refusal | None:
        """Why this request is refused, or None. ``headers``: each header's values, by lower-case name."""
        hosts = headers.get("host", [])
        if len(hosts) != 1:
            why = "has no Host header" if not hosts else "has more than one Host header"
            return Refusal(400, f"the request {why}", "invalid_host", "Host")
        if not self._host_ok(hosts[0]):
            return Refusal(
                421,
                f"this server does not answer to Host {hosts[0][:200]!r} (only to loopback names, the address "
                "it is bound to and its --allowed-host names: behind a proxy, start it with --allowed-host NAME)",
                "misdirected_request",
                "Host",
            )
        origins = headers.get("origin", [])
        bad = next((o for o in origins if not self._origin_ok(o)), None)
        if bad is not None:
            return Refusal(
                403,
                f"a request from a page at Origin {bad[:200]!r} is refused: the Origin must be one of the "
                "hosts this server answers to",
                "forbidden_origin",
                "Origin",
            )
        if _cross_site(method, headers):
            return Refusal(
                403,
                "a cross-site request is refused (Sec-Fetch-Site: cross-site): another site's page may link to "
                "this server, not load from it",
                "cross_site_request",
                "Sec-Fetch-Site",
            )
        length = (headers.get("content-length") or ["0"])[0].strip()
        if method.upper() in BODY_METHODS and (length != "0" or "transfer-encoding" in headers):
            sent = (headers.get("content-type") or [""])[0]
            if sent.partition(";")[0].strip().lower() != JSON:
                shown = repr(sent[:200]) if sent else "none"
                return Refusal(
                    415,
                    f"the request body must be {JSON} (Content-Type {shown} sent)",
                    "unsupported_media_type",
                    "Content-Type",
                )
        return None

    def _host_allowed(self, value: str) -> bool:
        host = _entry(value)
        return isinstance(host, _Entry) and self.serves(host.name, host.port)

    def _origin_allowed(self, origin: str) -> bool:
        try:
            parts = urlsplit(origin.strip())
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
            return False
        return self.serves(parts.hostname.rstrip("."), port)


def _cross_site(method: str, headers: Mapping[str, list[str]]) -> bool:
    """Whether a browser says another site's page made this request (Fetch Metadata), other than by a link
    the user followed. A ``<script src>`` carries no Origin: without this, a page could include
    judge-view's ``/data/index.js`` (JavaScript that calls a function the page defines) and read the run."""
    site = (headers.get("sec-fetch-site") or [""])[0].strip().lower()
    if site != "cross-site":
        return False
    mode = (headers.get("sec-fetch-mode") or [""])[0].strip().lower()
    dest = (headers.get("sec-fetch-dest") or [""])[0].strip().lower()
    return not (mode == "navigate" and method.upper() in ("GET", "HEAD") and dest not in ("object", "embed"))


def _entry(value: str) -> _Entry | str:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` (or a bare IPv6 address) as an entry, or what is
    wrong with it."""
    text = value.strip().lower()
    if not text:
        return "empty"
    if "*" in text:
        return "wildcards are not allowed: name each host (a pattern would let rebound names through)"
    if "/" in text or "@" in text or " " in text:
        return "give a host name, with an optional :PORT, not a URL"
    port_text = None
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return "an IPv6 address in brackets, then an optional :PORT"
        port_text = rest[1:] if rest else None
        if not isinstance(_ip(name), ipaddress.IPv6Address):
            return f"{name!r} is not an IPv6 address"
    elif text.count(":") > 1:  # a bare IPv6 address (a bound address), no port
        name = text
        if _ip(name) is None:
            return "an IPv6 address goes in brackets: [::1]:8000"
    else:
        name, colon, port_text = text.partition(":")
        port_text = port_text if colon else None
        name = name.rstrip(".")
        if _ip(name) is None and not all(_LABEL.fullmatch(x) for x in name.split(".")):
            return "not a host name (letters, digits, hyphens and dots) or an IP address"
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return f"port {port_text!r} is not a number from 1 to 65535"
        port = int(port_text)
    return _Entry(name, port)


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _show(e: _Entry) -> str:
    name = f"[{e.name}]" if ":" in e.name else e.name
    return name if e.port is None else f"{name}:{e.port}"


#: an ASGI app: (scope, receive, send); loosely typed, as Starlette's and uvicorn's differ
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


class HostGuard:
    """ASGI middleware: a request the :class:`HostPolicy` refuses is answered by ``respond(refusal)`` (an
    ASGI app: the server's own error shape) before any route or other middleware runs."""

    def __init__(
        self,
        app: ASGIApp,
        policy: HostPolicy,
        respond: Callable[[Refusal], ASGIApp],
        counted: Callable[[str, int], None] | None = None,
    ):
        """``counted(path, status)``, when given, is told of each refusal (a server's request metrics)."""
        self.app, self.policy, self.respond, self.counted = app, policy, respond, counted

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers: dict[str, list[str]] = {}
            for k, v in scope["headers"]:
                headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
            refusal = self.policy.refusal(scope.get("method", "GET"), headers)
            if refusal is not None:
                if self.counted is not None:
                    self.counted(scope.get("path", ""), refusal.status)
                await self.respond(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
