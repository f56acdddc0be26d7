"""The protocol answers like the APIs its clients know: every error in OpenAI's shape with a string code
(unknown routes and methods included), a chunked body over the limit is 413 on every route, a body that is
not JSON is 400 on every route, and a server reachable from other machines needs a key or an explicit
flag."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from serving import REPO, free_port, running_server, server_env

ROUTES_WITH_BODIES = ["/v1/score", "/v1/chat/completions"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    args = ["--judge", "tiny", "--rubric", "mmie", "--max-body-mb", "1"]
    with running_server(args, tmp_path_factory.mktemp("log")) as s:
        yield s


def openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["code"], str) and isinstance(err["type"], str)
    return err


@pytest.mark.parametrize(
    "method, path, status, code",
    [
        ("GET", "/v1/nothing", 404, "not_found"),
        ("POST", "/v2/score", 404, "not_found"),
        ("GET", "/v1/score", 405, "method_not_allowed"),
        ("DELETE", "/v1/models", 405, "method_not_allowed"),
        ("PUT", "/v1/chat/completions", 405, "method_not_allowed"),
    ],
)
def test_unknown_routes_and_methods_answer_in_the_error_shape(server, method, path, status, code):
    err = openai_error(httpx.request(method, server.url + path), status)
    assert err["code"] == code and path in err["message"]


@pytest.mark.parametrize("path", ROUTES_WITH_BODIES + ["/v1/models", "/health"])
def test_a_chunked_body_over_the_limit_is_413_on_every_route(server, path):
    def chunks():  # no Content-Length: the server counts the body as it arrives
        for _ in range(40):
            yield b"x" * 50_000

    method = "POST" if path in ROUTES_WITH_BODIES else "GET"
    r = httpx.request(
        method, server.url + path, content=chunks(), headers={"Content-Type": "application/json"}
    )
    err = openai_error(r, 413)
    assert err["code"] == "request_too_large" and "--max-body-mb" in err["message"]


@pytest.mark.parametrize("path", ROUTES_WITH_BODIES)
@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe", b'{"items": [1,]}'])
def test_a_body_that_is_not_json_is_400_on_every_route(server, path, body):
    r = httpx.post(server.url + path, content=body, headers={"Content-Type": "application/json"})
    err = openai_error(r, 400)
    assert err["code"] == "invalid_json"


def test_refusals_carry_the_field_as_param(server):
    r = httpx.post(server.url + "/v1/score", json={"items": [{"id": "a", "task": "SA", "question": "q"}]})
    err = openai_error(r, 422)
    assert err["param"] == "items[0].response" and "items[0] (id 'a')" in err["message"]
    r = httpx.post(server.url + "/v1/score", json={"items": [], "criteria": "all"})
    assert openai_error(r, 422)["param"] == "items"
    r = httpx.post(server.url + "/v1/score", json={"itemz": []})
    assert openai_error(r, 422)["param"] in ("items", "itemz")


def serve_args(*extra: str) -> list[str]:
    return [sys.executable, "-m", "judge.cli.serve", "--judge", "tiny", "--rubric", "mmie", *extra]


def test_an_address_other_than_loopback_needs_a_key_or_a_flag(tmp_path):
    port = str(free_port())
    run = subprocess.run(
        serve_args("--host", "0.0.0.0", "--port", port),
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "--api-key" in run.stderr and "--allow-unauthenticated" in run.stderr
    assert "Traceback" not in run.stderr
    for extra in (["--api-key", "sk-x"], ["--allow-unauthenticated"]):
        with running_server(
            ["--judge", "tiny", "--rubric", "mmie", "--host", "0.0.0.0", *extra], tmp_path
        ) as s:
            assert httpx.get(s.url + "/health").status_code == 200


@pytest.mark.parametrize("path", ROUTES_WITH_BODIES)
@pytest.mark.parametrize("body", [b"[]", b"1", b'"items"'])
def test_json_that_is_not_an_object_is_422(server, path, body):
    r = httpx.post(server.url + path, content=body, headers={"Content-Type": "application/json"})
    assert openai_error(r, 422)["code"] == "invalid_request"
