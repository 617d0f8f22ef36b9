"""Malformed HTTP gets a 4xx, never a 500, a hang or a smuggled request; incomplete requests time out.

Statuses are the live brokers' (Cowboy answers these with an empty body; fakerabbit adds RabbitMQ's error JSON).
Timeouts are checked on the fake only, with the listener's timeouts shortened to tens of milliseconds (RabbitMQ:
408 after 5 s of incomplete head, a stalled body dropped after 60 s - seen live on 4.3.6)."""

from __future__ import annotations

import json
import re
import socket
from urllib.parse import urlsplit

import pytest

from tests.management.conftest import Api

AUTH = "Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n"
JSON_CT = "Content-Type: application/json\r\n"


def _exchange(api: Api, data: bytes, *, timeout: float = 5.0) -> bytes:
    parts = urlsplit(api.base)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            chunks.append(b"<timeout>")
        return b"".join(chunks)


def _statuses(answer: bytes) -> list[int]:
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


# case -> (request, status, the first version whose Cowboy refuses it). The fake refuses every case whatever its
# profile: live 3.10.8 runs the smuggled second request and 3.10.8/4.0.5 accept NUL in a header and bare LFs
# (200); 4.3.6 refuses them all.
MALFORMED = {
    "content-length and transfer-encoding": (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON_CT}Content-Length: 5\r\n"
        f"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/whoami HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n",
        400,
        "4.0",
    ),
    "content-length 1_0": (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: 1_0\r\n\r\n{{}}",
        400,
        "3.0",
    ),
    "content-length -1": (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON_CT}Content-Length: -1\r\n\r\n",
        400,
        "3.0",
    ),
    "NUL in a header": (f"GET /api/whoami HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n{AUTH}\r\n", 400, "4.1"),
    "space before the colon": (f"GET /api/whoami HTTP/1.1\r\nHost : x\r\n{AUTH}\r\n", 400, "3.0"),
    "bare LF": (f"GET /api/whoami HTTP/1.1\nHost: x\n{AUTH.strip()}\n\n", 400, "4.1"),
    "bad method": (f"G@T /api/whoami HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n", 400, "3.0"),
    "no Host": (f"GET /api/whoami HTTP/1.1\r\n{AUTH}\r\n", 400, "3.0"),
    "a 20,000-byte header value": (
        f"GET /api/whoami HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 20000}\r\n{AUTH}\r\n",
        431,
        "3.0",
    ),
    "HTTP/2.0": (f"GET /api/whoami HTTP/2.0\r\nHost: x\r\n{AUTH}\r\n", 505, "3.0"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_requests_get_a_4xx_and_nothing_else(api: Api, case: str) -> None:
    request, status, refused_from = MALFORMED[case]
    # a real broker keeps a connection it accepted a request on open until its 5 s idle timeout: read 1 s
    answer = _exchange(api, request.encode("latin-1"), timeout=5.0 if api.is_fake else 1.0)
    if not api.is_fake and not api.at_least(refused_from):
        # older Cowboy: 3.10.8 answers the smuggled request (204 then 200), NUL passes, a bare-LF request line
        # is read as an unknown HTTP version (505)
        older = {"content-length and transfer-encoding": [204, 200], "NUL in a header": [200], "bare LF": [505]}
        assert _statuses(answer) == older[case]
        return
    assert _statuses(answer) == [status], answer[:300]  # one answer: a smuggled second request never runs
    if api.is_fake:
        body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        assert set(body) == {"error", "reason"}
        assert b"Traceback" not in answer


def test_deeply_nested_json_is_a_400(api: Api) -> None:
    body = "[" * 5000 + "]" * 5000
    request = (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON_CT}Content-Length: {len(body)}\r\n"
        f"Connection: close\r\n\r\n{body}"
    )
    answer = _exchange(api, request.encode())
    assert _statuses(answer) == [400]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"error": "bad_request", "reason": "failed_to_parse_json"}


@pytest.mark.fake_only
def test_deeply_nested_arguments_are_a_400(api: Api) -> None:
    raw = '{"arguments":' + _deep(3000) + "}"
    answer = api.request("PUT", "/api/queues/%2F/deep", raw=raw.encode())
    assert 400 <= answer.status < 500 and set(answer.body) == {"error", "reason"}


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.fake_only
def test_a_bad_chunk_size_is_a_400(api: Api) -> None:
    """Cowboy (3.10.8, 4.0.5, 4.3.6) waits on ``0x2`` until its 60 s idle timeout; fakerabbit answers at once."""
    request = (
        f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON_CT}Transfer-Encoding: chunked\r\n\r\n"
        "0x2\r\n{}\r\n0\r\n\r\n"
    )
    answer = _exchange(api, request.encode())
    assert _statuses(answer) == [400]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"] == "bad_request"


@pytest.mark.fake_only
def test_an_incomplete_head_gets_408_and_a_stalled_body_is_dropped(api: Api) -> None:
    assert api.fake is not None and api.fake.management is not None
    http = api.fake.management.http
    assert (http.head_timeout, http.body_timeout) == (5.0, 60.0)  # RabbitMQ's
    http.head_timeout = http.body_timeout = http.idle_timeout = 0.05
    answer = _exchange(api, b"GET /api/whoami HTTP/1.1\r\nHost: x\r\n")
    assert _statuses(answer) == [408]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"error": "request_timeout", "reason": "request_timeout"}
    stalled = f"POST /api/definitions HTTP/1.1\r\nHost: x\r\n{AUTH}{JSON_CT}Content-Length: 100\r\n\r\n{{"
    assert _exchange(api, stalled.encode()) == b""  # closed without an answer, as Cowboy does
    assert _exchange(api, b"") == b""  # an idle connection is closed quietly


@pytest.mark.fake_only
def test_keep_alive_still_works_after_the_timeouts_are_set(api: Api) -> None:
    one = f"GET /api/whoami HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n"
    last = f"GET /api/whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{AUTH}\r\n"
    assert _statuses(_exchange(api, (one + one + last).encode())) == [200, 200, 200]


@pytest.mark.fake_only
def test_a_handler_bug_is_a_500_without_details(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from fakerabbit.management import admin

    def broken(ctx: object) -> object:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(admin, "whoami", broken)
    from fakerabbit.management import api as api_module

    for r in api_module.ROUTES:
        if r.pattern == ("api", "whoami"):
            monkeypatch.setitem(r.methods, "GET", broken)
    a = api.request("GET", "/api/whoami")
    assert a.status == 500
    assert "secret" not in a.text and "Traceback" not in a.text
    assert a.body == {"error": "internal_error", "reason": "Internal Server Error"}
