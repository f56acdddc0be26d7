"""judge-serve answers only the Host names it serves (DNS rebinding), refuses pages of other origins and
bodies that are not declared JSON (a cross-site form or ``fetch`` needs no CORS preflight for text/plain),
and sends no CORS headers; ``--allowed-host`` adds a name, and a bad one is a clear command-line error.
The judge-view side is in test_view.py; the rules are ``judge.core.hosts``."""

from __future__ import annotations

import ipaddress
import json
import socket
import time

import httpx
import pytest
from serving import running_server

ALLOWED = "judge.example.org"
ITEM = {"id": "q1", "task": "SA", "question": "Continue the story.", "response": "Then it rained."}
#: one valid body per POST route
BODIES = {
    "/v1/score": {"items": [ITEM]},
    "/v1/chat/completions": {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
    },
    "/get_reward": {"query": ["hello"]},
    "/v1/reward": {"query": ["hello"]},
}
GETS = [
    "/health",
    "/ready",
    "/metrics",
    "/v1/models",
    "/v1/models/tiny",
    "/v1/judge",
    "/openapi.json",
    "/nope",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Keyless, on loopback: what a rebinding page would reach."""
    args = ["--judge", "tiny", "--rubric", "mmie", "--reward-task", "SA", "--allowed-host", ALLOWED]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def port_of(server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def refused(r: httpx.Response, status: int, code: str, param: str) -> str:
    assert r.status_code == status, (r.status_code, r.text[:300])
    err = r.json()["error"]
    assert err["code"] == code and err["param"] == param, err
    assert not any(k.lower().startswith("access-control-") for k in r.headers), r.headers
    return err["message"]


@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:{port}", "localhost.attacker.example"]
)
def test_a_foreign_host_is_421_on_every_route(server, host):
    """Before: 200 on every route (the whole judge, keyless, to any page that rebinds its name)."""
    headers = {"Host": host.format(port=port_of(server))}
    for path in GETS:
        r = httpx.get(server.url + path, headers=headers)
        assert "--allowed-host" in refused(r, 421, "misdirected_request", "Host"), path
    for path, body in BODIES.items():
        r = httpx.post(server.url + path, json=body, headers=headers, timeout=60)
        assert "--allowed-host" in refused(r, 421, "misdirected_request", "Host"), path


@pytest.mark.parametrize("host", ["localhost", "localhost:{port}", "127.0.0.1:{port}", "127.0.0.1", "[::1]",
                                  "[::1]:{port}", "LocalHost:{port}", ALLOWED, "judge.example.org:443"])  # fmt: skip
def test_loopback_names_and_allowed_hosts_are_served(server, host):
    headers = {"Host": host.format(port=port_of(server))}
    assert httpx.get(server.url + "/health", headers=headers).status_code == 200
    r = httpx.post(server.url + "/v1/score", json=BODIES["/v1/score"], headers=headers, timeout=60)
    assert r.status_code == 200 and len(r.json()["results"]) == 1, r.text[:300]


@pytest.mark.parametrize("path", list(BODIES))
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None])  # fmt: skip
def test_a_body_not_declared_json_is_415(server, path, content_type):
    """Before: a text/plain body (what a page posts cross-site without a preflight) was parsed as JSON."""
    headers = {"Content-Type": content_type} if content_type else {}
    r = httpx.post(server.url + path, content=json.dumps(BODIES[path]).encode(), headers=headers, timeout=60)
    message = refused(r, 415, "unsupported_media_type", "Content-Type")
    assert "application/json" in message and (content_type or "none").split(";")[0] in message, message


def test_json_with_a_charset_and_bodiless_posts_are_not_refused(server):
    r = httpx.post(
        server.url + "/v1/score",
        content=b'{"items": [{"id": "q1", "task": "SA", "question": "q", "response": "r"}]}',
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
        timeout=60,
    )
    assert r.status_code == 200, r.text[:300]
    assert httpx.post(server.url + "/v2/nothing").status_code == 404  # no body: the route's own answer


@pytest.mark.parametrize("origin", ["http://attacker.example", "https://attacker.example:8000", "null",
                                    "http://localhost.attacker.example", "file://", "http://127.0.0.1.nip.io"])  # fmt: skip
def test_a_foreign_origin_is_403(server, origin):
    """Before: 200 (and no key on loopback: any page's POST was scored)."""
    headers = {"Origin": origin}
    message = refused(httpx.get(server.url + "/health", headers=headers), 403, "forbidden_origin", "Origin")
    assert origin in message
    r = httpx.post(server.url + "/v1/score", json=BODIES["/v1/score"], headers=headers, timeout=60)
    refused(r, 403, "forbidden_origin", "Origin")


def _requests_counted(server, route: str, status: int) -> float:
    import re

    text = httpx.get(server.url + "/metrics").text
    m = re.search(
        rf'judge_requests_total\{{route="{re.escape(route)}",status="{status}"\}} ([0-9.e+]+)', text
    )
    return float(m.group(1)) if m else 0.0


def test_host_and_origin_refusals_are_counted_in_metrics(server):
    """Before: refused ahead of the request counter, so /metrics showed no trace of a rebinding probe."""
    before = (_requests_counted(server, "/v1/score", 421), _requests_counted(server, "other", 403))
    for _ in range(3):
        r = httpx.post(
            server.url + "/v1/score", json=BODIES["/v1/score"], headers={"Host": "attacker.example"}
        )
        assert r.status_code == 421
    r = httpx.get(server.url + "/no/such/route", headers={"Origin": "http://attacker.example"})
    assert r.status_code == 403
    assert _requests_counted(server, "/v1/score", 421) == before[0] + 3
    # A path no route serves is counted as "other": a scanner cannot grow the label set.
    assert _requests_counted(server, "other", 403) == before[1] + 1
    assert "/no/such/route" not in httpx.get(server.url + "/metrics").text


def test_a_cross_site_request_without_an_origin_is_403(server):
    """What the browser says (Fetch Metadata) counts even where it sends no Origin."""
    fetch = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"}
    refused(httpx.get(server.url + "/v1/models", headers=fetch), 403, "cross_site_request", "Sec-Fetch-Site")
    own = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}
    assert httpx.get(server.url + "/v1/models", headers=own).status_code == 200


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:{port}", "http://[::1]:{port}",
                                    f"https://{ALLOWED}"])  # fmt: skip
def test_an_allowed_origin_is_served_without_cors_headers(server, origin):
    origin = origin.format(port=port_of(server))
    r = httpx.post(server.url + "/v1/score", json=BODIES["/v1/score"], headers={"Origin": origin}, timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert not any(k.lower().startswith("access-control-") for k in r.headers), r.headers
    preflight = httpx.options(
        server.url + "/v1/score",
        headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 405  # no CORS: a browser on another origin cannot read or send JSON
    assert not any(k.lower().startswith("access-control-") for k in preflight.headers), preflight.headers


def own_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if ipaddress.ip_address(address).is_loopback else address


def wait_health(url: str, proc) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "judge-serve exited"
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"{url} never answered /health")


@pytest.mark.parametrize("bind", ["own", "0.0.0.0"])
def test_the_bound_address_is_served(tmp_path, bind):
    """Bound to one address: that address as Host; bound to every address: any IP address (no DNS answer
    can rebind an address), never a name it was not given."""
    address = own_address()
    if address is None:
        pytest.skip("no non-loopback address on this machine")
    args = [
        "--judge",
        "tiny",
        "--rubric",
        "mmie",
        "--api-key",
        "sk-x",
        "--host",
        address if bind == "own" else bind,
    ]
    with running_server(args, tmp_path, wait_ready=False) as s:
        url = f"http://{address}:{port_of(s)}"
        wait_health(url, s.proc)
        assert httpx.get(url + "/health").status_code == 200  # Host: <address>:<port>
        for host in ("attacker.example", f"attacker.example:{port_of(s)}", "vm.local"):
            r = httpx.get(url + "/health", headers={"Host": host})
            refused(r, 421, "misdirected_request", "Host")
        other = httpx.get(url + "/health", headers={"Host": "10.1.2.3"}).status_code
        assert other == (200 if bind == "0.0.0.0" else 421)


def test_ipv6_loopback_bound_server_answers_its_own_address(tmp_path):
    args = ["--judge", "tiny", "--rubric", "mmie", "--host", "::1"]
    with running_server(args, tmp_path, wait_ready=False) as s:
        url = f"http://[::1]:{port_of(s)}"
        wait_health(url, s.proc)
        assert httpx.get(url + "/health").status_code == 200  # Host: [::1]:<port>
        refused(
            httpx.get(url + "/health", headers={"Host": "attacker.example"}),
            421,
            "misdirected_request",
            "Host",
        )


@pytest.mark.parametrize("value, why", [("*", "wildcards"), ("*.example.org", "wildcards"),
                                        ("http://judge.example.org", "not a URL"), ("judge.example.org:0", "port"),
                                        ("judge example", "not a URL"), ("::1", None), ("", "empty"),
                                        ("bad..name", "not a host name"), ("[::1", "IPv6")])  # fmt: skip
def test_a_bad_allowed_host_is_a_command_line_error(value, why, capsys):
    from judge.cli.serve import main as serve_main
    from judge.cli.view import main as view_main
    from judge.core.errors import ConfigError
    from judge.serve.config import ServeConfig

    if why is None:  # a bare IPv6 address is read as one, shown in brackets
        assert ServeConfig(judge="tiny", allowed_host=[value]).allowed_host == ["[::1]"]
        return
    with pytest.raises(ConfigError, match=why):
        ServeConfig(judge="tiny", allowed_host=[value])
    for main in (serve_main, view_main):
        assert main(["--judge", "tiny", "--allowed-host", value] if main is serve_main
                    else ["x", "--allowed-host", value]) == 2  # fmt: skip
        err = capsys.readouterr().err
        assert err.startswith("error: --allowed-host") and why in err and "Traceback" not in err, err
