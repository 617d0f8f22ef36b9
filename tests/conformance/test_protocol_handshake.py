"""Connection handshake on the wire: protocol header, start/start-ok, auth, tune/tune-ok, open, close, heartbeats.

Raw-socket tests (tests/rawamqp.py) so that every byte and every close is visible; each runs against
the fake and, with FAKERABBIT_REAL_URLS, against RabbitMQ 3.10.8, 4.0.5 and 4.3.6. Expectations were taken from
the live brokers, per version where a release changed them.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pika
import pytest
from pika import spec

from fakerabbit.protocol import connection as fake_connection
from tests.conformance.conftest import Target
from tests.rawamqp import HEADER, RawAMQP, amqplain_response, frame

#: RabbitMQ closes the socket this long after a handshake error or a fatal frame error.
SILENT_CLOSE_DELAY = 3.0


@pytest.fixture
def quick_silent_close(broker: Target, monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """How long to wait for a silent close: the fake's 3 s delay is shortened (the real broker's is not)."""
    if broker.is_fake:
        monkeypatch.setattr(fake_connection, "SILENT_CLOSE_DELAY", 0.05)
    yield SILENT_CLOSE_DELAY + 1.5


def start_ok(
    c: RawAMQP, *, mechanism: str = "PLAIN", response: bytes = b"\x00guest\x00guest", afc: bool = True
) -> None:
    c.send(HEADER)
    start = c.read_frame()
    assert start is not None and start.name == "Connection.Start"
    props = {"capabilities": {"authentication_failure_close": True}} if afc else {"product": "test"}
    c.send_method(0, spec.Connection.StartOk(props, mechanism, response, "en_US"))


# -- protocol header ----------------------------------------------------------------------------------------------


SASL_HEADER = b"AMQP\x03\x01\x00\x00"


@pytest.mark.parametrize(
    ("header", "offered_from_4_0"),
    [
        (b"AMQP\x00\x00\x09\x00", HEADER),  # rabbit_reader: {0, 0, Minor, _} with Minor >= 9 gets 0-9-1
        (b"AMQP\x00\x00\x0a\x00", HEADER),
        (b"AMQP\x00\x00\x08\x00", SASL_HEADER),
        (b"AMQP\x00\x01\x00\x00", SASL_HEADER),  # AMQP 1.0 without SASL: sasl_required
        (b"HTTP/1.1", SASL_HEADER),
        (b"amqp\x00\x00\x09\x01", SASL_HEADER),
        (b"GET / HTTP/1.1\r\n\r\n", SASL_HEADER),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01", SASL_HEADER),  # a TLS client hello
    ],
)
def test_wrong_protocol_header_gets_a_header_and_close(broker: Target, header: bytes, offered_from_4_0: bytes) -> None:
    """Up to 3.13 every refused header is answered with 0-9-1's; from 4.0 (native AMQP 1.0) with AMQP 1.0 SASL's
    unless the client asked for 0-9 or later."""
    c = RawAMQP.socket_to(broker.url)
    c.send(header)
    assert c.read_raw(timeout=3) == (offered_from_4_0 if broker.at_least("4.0") else HEADER)
    assert c.eof
    c.sock.close()


def test_amqp_1_0_sasl_header(broker: Target) -> None:
    """4.x speaks AMQP 1.0 after this header (its sasl-mechanisms frame follows); fakerabbit speaks only 0-9-1:
    it answers with the same header and closes (docs/compatibility.md). Up to 3.13: the 0-9-1 header."""
    c = RawAMQP.socket_to(broker.url)
    c.send(SASL_HEADER)
    if not broker.at_least("4.0"):
        assert c.read_raw(timeout=3) == HEADER
        assert c.eof
    else:
        assert c.read_raw(timeout=1).startswith(SASL_HEADER)
    c.sock.close()


def test_amqp_0_9_header_is_treated_as_0_9_1(broker: Target) -> None:
    c = RawAMQP.socket_to(broker.url)
    c.send(b"AMQP\x01\x01\x00\x09")
    f = c.read_frame()
    assert f is not None and f.name == "Connection.Start"
    assert (f.method.version_major, f.method.version_minor) == (0, 9)
    c.sock.close()


def test_partial_header_waits(broker: Target) -> None:
    c = RawAMQP.socket_to(broker.url)
    c.send(b"AMQP\x00\x00\x09")
    assert c.read_raw(timeout=0.5) == b""
    assert not c.eof
    c.send(b"\x01")
    f = c.read_frame()
    assert f is not None and f.name == "Connection.Start"
    c.sock.close()


# -- connection.start ---------------------------------------------------------------------------------------------


@pytest.mark.rabbitmq_version("3.10")
def test_connection_start_matches_rabbitmq(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, open=False)
    start = c.start
    assert start is not None
    m = start.method
    assert (m.version_major, m.version_minor) == (0, 9)
    assert m.mechanisms == b"PLAIN AMQPLAIN"
    assert m.locales == b"en_US"
    props = m.server_properties
    assert list(props) == ["capabilities", "cluster_name", "copyright", "information", "platform", "product", "version"]
    assert list(props["capabilities"]) == [
        "publisher_confirms",
        "exchange_exchange_bindings",
        "basic.nack",
        "consumer_cancel_notify",
        "connection.blocked",
        "consumer_priorities",
        "authentication_failure_close",
        "per_consumer_qos",
        "direct_reply_to",
    ]
    assert all(v is True for v in props["capabilities"].values())
    assert props["product"] == "RabbitMQ"
    assert props["version"].startswith("3.10.")
    assert props["information"] == "Licensed under the MPL 2.0. Website: https://rabbitmq.com"
    assert props["copyright"] == "Copyright (c) 2007-2022 VMware, Inc. or its affiliates."
    assert props["platform"].startswith("Erlang/OTP ")
    assert props["cluster_name"].startswith("rabbit@")
    tune = c.tune
    assert tune is not None
    assert (tune.method.channel_max, tune.method.frame_max, tune.method.heartbeat) == (2047, 131072, 60)
    c.sock.close()


@pytest.mark.fake_only
@pytest.mark.parametrize(("profile", "version"), [("3.12", "3.12."), ("3.13", "3.13."), ("4.0", "4.0."), (None, "4.")])
def test_server_version_follows_profile(profile: str | None, version: str) -> None:
    from fakerabbit import FakeRabbit

    with FakeRabbit(rabbitmq_version=profile) as rabbit:
        conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
        try:
            props = conn._impl.server_properties
            assert props["version"].startswith(version)
            assert props["product"] == "RabbitMQ"
        finally:
            conn.close()


# -- authentication ----------------------------------------------------------------------------------------------


def test_plain_and_amqplain_log_in(broker: Target) -> None:
    for mechanism in ("PLAIN", "AMQPLAIN"):
        c = RawAMQP.connect(broker.url, mechanism=mechanism)
        assert c.tune is not None and c.last_close() is None, c.seen
        c.open_channel(1)
        c.close()


def test_bad_password_with_authentication_failure_close(broker: Target, quick_silent_close: float) -> None:
    for mechanism in ("PLAIN", "AMQPLAIN"):
        c = RawAMQP.connect(broker.url, password="wrong", mechanism=mechanism)
        assert c.tune is None
        close = c.last_close()
        assert close is not None
        assert (close.channel, close.reply_code, close.class_id, close.method_id) == (0, 403, 0, 0)
        assert close.reply_text == (
            f"ACCESS_REFUSED - Login was refused using authentication mechanism {mechanism}. "
            "For details see the broker logfile."
        )
        assert c.wait_eof(quick_silent_close)
        c.sock.close()


def _amqplain_table(*fields: tuple[bytes, bytes, bytes]) -> bytes:
    """An AMQPLAIN response: a table without its length prefix, fields in the order given."""
    return b"".join(bytes([len(key)]) + key + tag + value for key, tag, value in fields)


def _longstr(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


@pytest.mark.parametrize(
    ("fields", "accepted"),
    [
        (
            (
                (b"LOGIN", b"S", _longstr(b"guest")),
                (b"LOGIN", b"S", _longstr(b"nobody")),
                (b"PASSWORD", b"S", _longstr(b"guest")),
            ),
            True,
        ),
        (
            (
                (b"LOGIN", b"S", _longstr(b"nobody")),
                (b"LOGIN", b"S", _longstr(b"guest")),
                (b"PASSWORD", b"S", _longstr(b"guest")),
            ),
            False,
        ),
        (
            (
                (b"LOGIN", b"S", _longstr(b"guest")),
                (b"PASSWORD", b"S", _longstr(b"guest")),
                (b"PASSWORD", b"S", _longstr(b"x")),
            ),
            True,
        ),
        (((b"LOGIN", b"S", _longstr(b"guest")), (b"PASSWORD", b"x", _longstr(b"guest"))), True),
        (((b"LOGIN", b"x", _longstr(b"guest")), (b"PASSWORD", b"S", _longstr(b"guest"))), True),
        (((b"LOGIN", b"S", _longstr(b"guest")), (b"PASSWORD", b"I", struct.pack(">i", 5))), False),
        (((b"LOGIN", b"I", struct.pack(">i", 5)), (b"PASSWORD", b"S", _longstr(b"guest"))), None),
    ],
    ids=[
        "duplicate LOGIN, first counts",
        "duplicate LOGIN, first refused",
        "duplicate PASSWORD, first counts",
        "binary PASSWORD",
        "binary LOGIN",
        "integer PASSWORD",
        "integer LOGIN",
    ],
)
def test_amqplain_fields(
    broker: Target, quick_silent_close: float, fields: tuple[tuple[bytes, bytes, bytes], ...], accepted: bool | None
) -> None:
    """rabbit_auth_mechanism_amqplain finds the first LOGIN and PASSWORD; a string or a binary is a string,
    another PASSWORD is refused like a bad password (403 to a client with authentication_failure_close), another
    LOGIN ends the handshake silently (``accepted`` None). After a refused login the socket closes after the
    silent-close delay (3 s), not at once."""
    c = RawAMQP.socket_to(broker.url)
    start_ok(c, mechanism="AMQPLAIN", response=_amqplain_table(*fields))
    f = c.read_frame(timeout=quick_silent_close)
    if accepted is None:
        assert f is None and c.eof
        c.sock.close()
        return
    assert f is not None
    if accepted:
        assert f.name == "Connection.Tune"
        c.sock.close()
        return
    assert f.name == "Connection.Close"
    assert (f.method.reply_code, f.method.reply_text) == (
        403,
        "ACCESS_REFUSED - Login was refused using authentication mechanism AMQPLAIN. "
        "For details see the broker logfile.",
    )
    t0 = time.monotonic()
    assert c.wait_eof(quick_silent_close)
    if not broker.is_fake:  # (the fake's delay is shortened here; test_silent_close_takes_three_seconds times it)
        assert time.monotonic() - t0 > 2.0
    c.sock.close()


def test_refused_login_closes_three_seconds_later(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, password="wrong")
    assert c.last_close() is not None
    t0 = time.monotonic()
    assert c.wait_eof(6)
    assert 2.5 <= time.monotonic() - t0 <= 4.5
    c.sock.close()


def test_unknown_user_is_refused_like_a_bad_password(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, user="no-such-user-x", password="x")
    close = c.last_close()
    assert close is not None and close.reply_code == 403
    assert close.reply_text.startswith("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN.")
    c.sock.close()


@pytest.mark.parametrize(
    ("mechanism", "response", "afc"),
    [
        ("PLAIN", b"\x00guest\x00wrong", False),  # no authentication_failure_close capability: no close frame
        ("FOO", b"whatever", True),  # unknown mechanism
        ("PLAIN", b"garbage", True),  # malformed PLAIN response
        ("PLAIN", b"guest\x00guest\x00guest", True),  # an authorization identity is not accepted
        ("PLAIN", b"", True),
        ("AMQPLAIN", b"\x05LOGINxx", True),  # malformed AMQPLAIN table
    ],
)
def test_handshake_errors_close_silently(
    broker: Target, quick_silent_close: float, mechanism: str, response: bytes, afc: bool
) -> None:
    c = RawAMQP.socket_to(broker.url)
    start_ok(c, mechanism=mechanism, response=response, afc=afc)
    assert c.read_frame(timeout=quick_silent_close) is None
    assert c.eof
    c.sock.close()


def test_silent_close_takes_three_seconds(broker: Target) -> None:
    c = RawAMQP.socket_to(broker.url)
    start_ok(c, mechanism="FOO", response=b"x")
    t0 = time.monotonic()
    assert c.read_frame(timeout=6) is None and c.eof
    assert 2.5 <= time.monotonic() - t0 <= 4.5
    c.sock.close()


def test_amqplain_client_properties_and_response(broker: Target) -> None:
    c = RawAMQP.socket_to(broker.url)
    start_ok(c, mechanism="AMQPLAIN", response=amqplain_response("guest", "guest"))
    f = c.read_frame()
    assert f is not None and f.name == "Connection.Tune"
    c.sock.close()


# -- tune / tune-ok -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel_max", "frame_max"),
    [(0, 131072), (2048, 131072), (65535, 131072), (2047, 0), (2047, 131073), (2047, 4095), (2047, 1)],
)
def test_tune_ok_out_of_range_closes_silently(
    broker: Target, quick_silent_close: float, channel_max: int, frame_max: int
) -> None:
    c = RawAMQP.connect(broker.url, channel_max=channel_max, frame_max=frame_max, open=False)
    assert c.read_frame(timeout=quick_silent_close) is None
    assert c.eof
    c.sock.close()


@pytest.mark.parametrize(("channel_max", "frame_max", "heartbeat"), [(1, 8192, 0), (2047, 131072, 65535), (7, 8192, 5)])
def test_tune_ok_within_range_opens(broker: Target, channel_max: int, frame_max: int, heartbeat: int) -> None:
    c = RawAMQP.connect(broker.url, channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat)
    assert c.last_close() is None
    c.open_channel(1)
    c.close()


def frame_min(broker: Target) -> int:
    """``?FRAME_MIN_SIZE``: 4096, 8192 from 4.1."""
    return 8192 if broker.at_least("4.1") else 4096


@pytest.mark.parametrize("frame_max", [4096, 8191])
def test_tune_ok_frame_max_below_the_minimum(broker: Target, quick_silent_close: float, frame_max: int) -> None:
    c = RawAMQP.connect(broker.url, frame_max=frame_max, open=False)
    c.send_method(0, spec.Connection.Open("/"))
    if frame_max >= frame_min(broker):
        assert c.wait("Connection.OpenOk").name == "Connection.OpenOk"
        c.close()
        return
    assert c.read_frame(timeout=quick_silent_close) is None  # refused in the handshake: silently
    assert c.eof
    c.sock.close()


@pytest.mark.parametrize("extra", [0, 1])
def test_start_ok_larger_than_frame_min_before_tune(broker: Target, quick_silent_close: float, extra: int) -> None:
    """Until tune-ok the frame_max is ?FRAME_MIN_SIZE: a bigger start-ok is a fatal frame error, silent in the
    handshake."""
    c = RawAMQP.socket_to(broker.url)
    c.send(HEADER)
    c.read_frame()
    start_ok = spec.Connection.StartOk({"product": "x"}, "PLAIN", b"\x00guest\x00guest", "en_US")
    base = len(b"".join(start_ok.encode())) + 4  # the payload with product "x"
    pad = frame_min(broker) - base + 1 + extra  # payload frame_min + extra: one more is too large
    start_ok.client_properties = {"product": "x" * pad}
    c.send_method(0, start_ok)
    if extra == 0:
        f = c.read_frame(timeout=quick_silent_close)
        assert f is not None and f.name == "Connection.Tune"
    else:
        assert c.read_frame(timeout=quick_silent_close) is None
        assert c.eof
    c.sock.close()


# -- connection.open ----------------------------------------------------------------------------------------------


def test_unknown_vhost(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, vhost="no-such-vhost")
    close = c.last_close()
    assert close is not None
    assert (close.channel, close.reply_code, close.class_id, close.method_id) == (0, 530, 10, 40)
    assert close.reply_text == "NOT_ALLOWED - vhost no-such-vhost not found"
    assert not c.wait_eof(0.3)  # the broker waits for close-ok...
    c.close_ok(0)
    assert c.wait_eof(2)  # ...and then closes
    c.sock.close()


def test_pika_sees_unknown_vhost_and_bad_password(broker: Target) -> None:
    base, _ = broker.url.rsplit("/", 1)
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as denied:
        pika.BlockingConnection(pika.URLParameters(base + "/other-vhost"))
    assert "NOT_ALLOWED - vhost other-vhost not found" in str(denied.value)
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as refused:
        pika.BlockingConnection(pika.URLParameters(broker.url.replace("guest:guest", "guest:nope")))
    assert "ACCESS_REFUSED" in str(refused.value)


def test_channel_frames_before_open_are_unexpected(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, open=False)
    c.send_method(1, spec.Channel.Open())
    close = c.expect_close()
    assert (close.reply_code, close.class_id, close.method_id) == (505, 0, 0)
    assert close.reply_text == "UNEXPECTED_FRAME - type 1, all octets = <<0,20,0,10,0>>"
    c.sock.close()


def test_connection_close_before_open(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, open=False)
    c.send_method(0, spec.Connection.Close(200, "bye", 0, 0))
    close = c.expect_close()
    assert (close.reply_code, close.class_id, close.method_id) == (504, 10, 50)
    assert close.reply_text == "CHANNEL_ERROR - unexpected method in connection state opening"
    c.sock.close()


def test_connection_methods_in_the_wrong_state(broker: Target) -> None:
    for method in (
        spec.Connection.StartOk({}, "PLAIN", b"\x00guest\x00guest", "en_US"),
        spec.Connection.TuneOk(2047, 131072, 0),
        spec.Connection.Open("/"),
        spec.Connection.CloseOk(),
        spec.Channel.Open(),
        spec.Queue.Declare(queue="x"),
    ):
        c = RawAMQP.connect(broker.url)
        c.send_method(0, method)
        close = c.expect_close()
        assert (close.channel, close.reply_code) == (0, 504)
        assert close.reply_text == "CHANNEL_ERROR - unexpected method in connection state running"
        assert (close.class_id, close.method_id) == (method.INDEX >> 16, method.INDEX & 0xFFFF)
        c.close_ok(0)
        assert c.wait_eof(2)
        c.sock.close()


def test_update_secret(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    f = c.rpc(0, spec.Connection.UpdateSecret(b"guest", "rotation"), "Connection.UpdateSecretOk")
    assert f.name == "Connection.UpdateSecretOk"
    c.open_channel(1)
    c.close()


def test_client_close_is_answered_and_releases_everything(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q, exclusive=True), "Queue.DeclareOk")
    f = c.rpc(0, spec.Connection.Close(200, "bye", 0, 0), "Connection.CloseOk")
    assert f.name == "Connection.CloseOk" and f.channel == 0
    c.sock.close()
    other = RawAMQP.connect(broker.url)
    other.open_channel(1)
    other.send_method(1, spec.Queue.Declare(queue=q, passive=True))
    close = other.expect_close()
    assert close.reply_code == 404  # the exclusive queue went with its connection
    other.close()


def test_methods_after_client_close_are_ignored(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.open_channel(1)
    c.send_method(0, spec.Connection.Close(200, "bye", 0, 0))
    c.send_method(1, spec.Basic.Qos(0, 1, False))
    frames = c.quiet(0.5)
    assert [f.name for f in frames] == ["Connection.CloseOk"]
    c.sock.close()


def test_methods_after_server_close_are_ignored_until_close_ok(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.send_method(0, spec.Channel.Open())  # 504 on channel 0
    assert c.expect_close().reply_code == 504
    c.send_method(1, spec.Channel.Open())
    c.send_method(0, spec.Connection.Open("/"))
    assert c.quiet(0.3) == []
    assert not c.eof
    c.close_ok(0)
    assert c.wait_eof(2)
    c.sock.close()


def test_client_close_while_server_closes_gets_close_ok(broker: Target) -> None:
    c = RawAMQP.connect(broker.url)
    c.send_method(0, spec.Channel.Open())
    assert c.expect_close().reply_code == 504
    f = c.rpc(0, spec.Connection.Close(200, "bye", 0, 0), "Connection.CloseOk")
    assert f.name == "Connection.CloseOk"
    c.sock.close()


# -- heartbeats --------------------------------------------------------------------------------------------------


def test_server_sends_heartbeats_every_half_interval(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, heartbeat=1)
    t0 = time.monotonic()
    times = []
    while time.monotonic() - t0 < 2.2:
        f = c.read_frame(timeout=3)
        assert f is not None and f.type == 8 and f.channel == 0 and f.payload == b""
        times.append(time.monotonic() - t0)
        c.send(frame(8, 0, b""))  # keep the connection alive
    assert 3 <= len(times) <= 6, times
    c.close()


def test_silent_client_is_dropped_after_three_intervals(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, heartbeat=1)
    t0 = time.monotonic()
    frames = []
    while True:
        f = c.read_frame(timeout=6)
        if f is None:
            break
        frames.append(f)
    elapsed = time.monotonic() - t0
    assert c.eof
    assert all(f.type == 8 for f in frames)  # no close frame: the socket just goes
    assert 2.5 <= elapsed <= 4.0, elapsed
    c.sock.close()


def test_client_heartbeats_keep_the_connection(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, heartbeat=1)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 4.5:
        c.send(frame(8, 0, b""))
        c.quiet(0.4)
        assert not c.eof
    c.open_channel(1)
    c.close()


def test_heartbeat_zero_means_none(broker: Target) -> None:
    c = RawAMQP.connect(broker.url, heartbeat=0)
    assert c.quiet(1.2) == []
    assert c.read_frame(timeout=0.3) is None and not c.eof
    c.close()


# -- a few pika-level checks -------------------------------------------------------------------------------------


def test_pika_negotiates_heartbeat_and_frame_max(broker: Target) -> None:
    params = pika.URLParameters(broker.url + "?heartbeat=7&frame_max=8192&channel_max=9")
    conn = pika.BlockingConnection(params)
    try:
        impl = conn._impl
        assert impl.params.heartbeat == 7
        assert impl.params.frame_max == 8192
        assert impl.params.channel_max == 9
        ch = conn.channel()
        q = broker.name()
        ch.queue_declare(q)
        body = bytes(range(256)) * 100  # 25600 bytes: 4 body frames of at most 8184
        ch.basic_publish("", q, body)
        assert ch.basic_get(q, auto_ack=True)[2] == body
    finally:
        conn.close()


def test_body_frames_respect_the_client_frame_max(broker: Target) -> None:
    q = broker.name()
    c = RawAMQP.connect(broker.url, frame_max=frame_min(broker))
    c.open_channel(1)
    c.rpc(1, spec.Queue.Declare(queue=q, auto_delete=False), "Queue.DeclareOk")
    c.publish(1, "", q, b"z" * 10000, frame_max=frame_min(broker))
    f = c.rpc(1, spec.Basic.Get(queue=q, no_ack=True), "Basic.GetOk", "Basic.GetEmpty")
    assert f.name == "Basic.GetOk"
    sizes = []
    head = c.read_frame()
    assert head is not None and head.type == 2
    while sum(sizes) < 10000:
        body = c.read_frame()
        assert body is not None and body.type == 3
        sizes.append(len(body.payload))
    assert sizes == ([8184, 1816] if frame_min(broker) == 8192 else [4088, 4088, 1824])
    c.send_method(1, spec.Queue.Delete(queue=q))
    c.close()


def test_start_ok_response_layout_is_checked_for_field_tables(broker: Target, quick_silent_close: float) -> None:
    """A malformed client-properties table in start-ok: the handshake fails without a close frame."""
    c = RawAMQP.socket_to(broker.url)
    c.send(HEADER)
    c.read_frame()
    args = struct.pack(">I", 3) + b"\x01aZ" + b"\x05PLAIN" + struct.pack(">I", 12) + b"\x00guest\x00guest\x05en_US"
    c.send(frame(1, 0, struct.pack(">I", spec.Connection.StartOk.INDEX) + args))
    assert c.read_frame(timeout=quick_silent_close) is None and c.eof
    c.sock.close()
