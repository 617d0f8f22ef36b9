"""One channel's state machine and content assembly (``ChannelHandler``), without a connection or a socket: the
channel is given a fake owner (what it needs of its connection, ``ChannelOwner``) and a writer whose transport
is a list; the broker behind it is real."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import pytest
from pika import spec

from fakerabbit.broker import errors
from fakerabbit.broker.broker import Broker
from fakerabbit.broker.session import ConnectionInfo, Session, SessionSink
from fakerabbit.clock import VirtualClock
from fakerabbit.protocol import framing
from fakerabbit.protocol.channel import ChannelHandler
from fakerabbit.protocol.codec import commands
from fakerabbit.protocol.output import Output
from tests.unit.protocol_harness import FakeTransport, decode, parse
from tests.unit.protocol_harness import method as method_frame

BODY = framing.FRAME_BODY


class Owner:
    """A connection as a channel sees it (``ChannelOwner``), recording what the channel tells it."""

    def __init__(self, broker: Broker, capabilities: Mapping[str, object] | None = None) -> None:
        self.broker = broker
        self.frame_max = 4096
        self.capabilities = capabilities or {}
        self.info: ConnectionInfo = broker.open_connection("guest", "/", client_properties={})
        self.closing: list[ChannelHandler] = []
        self.gone: list[int] = []

    def open_session(self, number: int, sink: SessionSink) -> Session:
        session = self.info.sessions[number] = Session(self.info, number, self.broker.vhost("/"), sink)
        return session

    def channel_closing(self, ch: ChannelHandler) -> None:
        self.closing.append(ch)

    def channel_gone(self, number: int) -> None:
        self.gone.append(number)


class Rig:
    def __init__(self, version: str | None = None, capabilities: Mapping[str, object] | None = None) -> None:
        self.broker = Broker(VirtualClock(), rabbitmq_version=version)
        self.owner = Owner(self.broker, capabilities)
        self.transport = FakeTransport()
        self.dirty = 0
        self.output = Output(self._dirty)
        self.output.transport = self.transport
        self.ch = ChannelHandler(self.owner, self.output, self.broker.profile.amqp, 1)

    def _dirty(self) -> None:
        self.dirty += 1

    def feed(self, data: bytes) -> None:
        """Hand every frame in ``data`` to the channel and run what it hands back, as the dispatcher does."""
        for ftype, _, payload in parse(data):
            work = self.ch.handle_frame(ftype, payload)
            if work is not None:
                work()

    def written(self) -> list[tuple[int, int, bytes]]:
        self.output.flush()
        data, self.transport.out = bytes(self.transport.out), bytearray()
        return parse(data)

    def methods(self) -> list[Any]:
        return [decode(p) for t, _, p in self.written() if t == 1]

    def open(self) -> Rig:
        self.feed(method_frame(1, spec.Channel.Open()))
        assert [m.NAME for m in self.methods()] == ["Channel.OpenOk"]
        return self


def m(x: Any) -> bytes:
    return method_frame(1, x)


def header(size: int, props: bytes = b"\x00\x00", class_id: int = 60) -> bytes:
    return struct.pack(">BHI", 2, 1, 12 + len(props)) + struct.pack(">HHQ", class_id, 0, size) + props + b"\xce"


def body(data: bytes) -> bytes:
    return struct.pack(">BHI", BODY, 1, len(data)) + data + b"\xce"


# -- the state machine ---------------------------------------------------------------------------------------


def test_only_channel_open_opens_a_channel() -> None:
    rig = Rig()
    with pytest.raises(errors.ChannelError) as exc:
        rig.feed(m(spec.Queue.Declare(queue="q")))
    assert (exc.value.code, exc.value.reply_text, exc.value.method_ids) == (
        504,
        "CHANNEL_ERROR - expected 'channel.open'",
        (50, 10),
    )
    assert rig.ch.state == "starting"
    rig.open()
    assert rig.ch.state == "open" and rig.owner.info.sessions[1] is rig.ch.session
    with pytest.raises(errors.ChannelError) as exc:
        rig.feed(m(spec.Channel.Open()))
    assert exc.value.reply_text == "CHANNEL_ERROR - second 'channel.open' seen"


def test_a_soft_error_closes_the_channel_and_later_methods_are_ignored() -> None:
    rig = Rig().open()
    rig.feed(m(spec.Queue.Declare(queue="q", passive=True)))
    (close,) = rig.methods()
    assert (close.NAME, close.reply_code, close.class_id, close.method_id) == ("Channel.Close", 404, 50, 10)
    assert close.reply_text == "NOT_FOUND - no queue 'q' in vhost '/'"
    assert rig.ch.state == "closing" and rig.ch.session.closed
    rig.feed(m(spec.Queue.Declare(queue="q2")))  # ignored while closing
    rig.feed(m(spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0)))  # answered
    assert [x.NAME for x in rig.methods()] == ["Channel.CloseOk"]
    assert "q2" not in rig.broker.vhost("/").queues
    rig.feed(m(spec.Channel.CloseOk()))
    assert rig.owner.gone == [1]


def test_the_empty_queue_shortcut_is_checked_before_the_state() -> None:
    """rabbit_channel expands "" before it looks at the channel's state: even a closing channel closes again."""
    rig = Rig().open()
    rig.feed(m(spec.Queue.Purge(queue="")))
    rig.feed(m(spec.Queue.Purge(queue="")))
    assert [(x.NAME, x.reply_text) for x in rig.methods()] == [
        ("Channel.Close", "NOT_FOUND - no previously declared queue")
    ] * 2


def test_a_client_close_waits_for_the_reader() -> None:
    rig = Rig().open()
    rig.feed(m(spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0)))
    assert rig.owner.closing == [rig.ch] and rig.ch.state == "closing"
    assert rig.methods() == []  # the dispatcher sends close-ok once it is done with the chunk


def test_unimplemented_methods_are_a_connection_error() -> None:
    rig = Rig().open()
    with pytest.raises(errors.CommandInvalid) as exc:
        rig.feed(m(spec.Channel.FlowOk(active=True)))
    assert (exc.value.reply_text, exc.value.method_ids) == ("COMMAND_INVALID - unimplemented method", (20, 21))


# -- content assembly -----------------------------------------------------------------------------------------


def test_a_publish_is_handed_on_once_its_content_is_complete() -> None:
    rig = Rig().open()
    rig.feed(m(spec.Queue.Declare(queue="q")))
    rig.methods()
    assert rig.ch.handle_frame(1, parse(m(spec.Basic.Publish(routing_key="q")))[0][2]) is None
    assert rig.ch.handle_frame(2, parse(header(6))[0][2]) is None
    assert rig.ch.handle_frame(BODY, b"abc") is None
    work = rig.ch.handle_frame(BODY, b"def")
    assert work is not None
    work()
    (entry,) = rig.broker.vhost("/").queues["q"].ready_entries()
    assert entry.msg.body == b"abcdef"


def test_an_empty_body_completes_at_the_header() -> None:
    rig = Rig().open()
    rig.feed(m(spec.Queue.Declare(queue="q")) + m(spec.Basic.Publish(routing_key="q")) + header(0))
    assert rig.broker.vhost("/").queues["q"].ready_count == 1


@pytest.mark.parametrize(
    ("frames", "text", "ids"),
    [
        (
            m(spec.Basic.Publish()) + m(spec.Basic.Qos()),
            "UNEXPECTED_FRAME - expected content header for class 60, got non content header frame instead",
            (60, 40),
        ),
        (
            m(spec.Basic.Publish()) + header(5) + m(spec.Basic.Qos()),
            "UNEXPECTED_FRAME - expected content body, got non content body frame instead",
            (60, 40),
        ),
        (body(b"x"), "UNEXPECTED_FRAME - expected method frame, got non method frame instead", (0, 0)),
        (
            m(spec.Basic.Publish()) + header(1, class_id=50),
            "UNEXPECTED_FRAME - expected content header for class 60, got one for class 50 instead",
            (60, 40),
        ),
    ],
)
def test_assembly_errors_are_the_readers(frames: bytes, text: str, ids: tuple[int, int]) -> None:
    rig = Rig().open()
    with pytest.raises(errors.UnexpectedFrame) as exc:
        rig.feed(frames)
    assert (exc.value.reply_text, exc.value.method_ids) == (text, ids)


def test_too_long_a_body_by_version() -> None:
    """4.3's assembler refuses a body frame longer than what remains; before, it waits for more forever."""
    strict = Rig("4.3").open()
    with pytest.raises(errors.FrameError) as exc:
        strict.feed(m(spec.Basic.Publish()) + header(2) + body(b"abc"))
    assert exc.value.reply_text == "FRAME_ERROR - content body frame exceeds remaining content size"
    lenient = Rig("4.0").open()
    lenient.feed(m(spec.Basic.Publish()) + header(2) + body(b"abc"))
    with pytest.raises(errors.UnexpectedFrame):
        lenient.feed(m(spec.Basic.Qos()))


def test_the_reserved_property_flag_bits_are_cleared() -> None:
    """RabbitMQ ignores flag bits 1 and 0; fakerabbit's property reader would not, so a publish clears them."""
    rig = Rig().open()
    rig.feed(m(spec.Queue.Declare(queue="q")))
    rig.feed(m(spec.Basic.Publish(routing_key="q")) + header(1, b"\x00\x03") + body(b"x"))
    (entry,) = rig.broker.vhost("/").queues["q"].ready_entries()
    assert entry.msg.props.raw == b"\x00\x00"


def test_a_malformed_property_block_is_541() -> None:
    rig = Rig().open()
    rig.feed(m(spec.Queue.Declare(queue="q")))
    with pytest.raises(errors.InternalError):
        rig.feed(m(spec.Basic.Publish(routing_key="q")) + header(1, b"\x80\x00\x05ab") + body(b"x"))
    assert rig.broker.vhost("/").queues["q"].ready_count == 0


def test_max_message_size_comes_from_the_profile() -> None:
    for version, limit in (("3.13", 134217728), ("4.0", 16777216)):
        rig = Rig(version).open()
        rig.feed(m(spec.Basic.Publish(routing_key="q")) + header(limit + 1) + body(b"x" * 10))
        rig.ch._remaining = 0  # the rest of the body is not worth sending
        work = rig.ch._complete()
        work()
        (close,) = rig.methods()
        assert (
            close.reply_text
            == f"PRECONDITION_FAILED - message size {limit + 1} is larger than configured max size {limit}"
        )


# -- frames out ----------------------------------------------------------------------------------------------


def test_confirms_are_coalesced_and_never_overtaken() -> None:
    """rabbit_channel:send_confirms_and_nacks: acks then nacks, each coalesced below the oldest of the other
    kind; a reply on the channel goes after the confirms of the publishes before it."""
    rig = Rig().open()
    rig.ch.send_confirm(True, 4, False)
    assert rig.dirty  # the writer was told: the confirms go out at the end of the batch
    rig.ch.send_confirm(False, 5, False)
    rig.ch.send_confirm(True, 6, False)
    rig.ch.send(commands.Basic.QosOk())
    got = [(x.NAME, getattr(x, "delivery_tag", None), getattr(x, "multiple", None)) for x in rig.methods()]
    assert got == [
        ("Basic.Ack", 4, True),
        ("Basic.Ack", 6, False),
        ("Basic.Nack", 5, False),
        ("Basic.QosOk", None, None),
    ]


def test_coalesced_acks_of_one_batch() -> None:
    rig = Rig().open()
    for tag in (1, 2, 3):
        rig.ch.send_confirm(True, tag, False)
    assert [(x.NAME, x.delivery_tag, x.multiple) for x in rig.methods()] == [("Basic.Ack", 3, True)]


def test_server_cancel_needs_the_capability_and_follows_the_reply() -> None:
    told = Rig(capabilities={"consumer_cancel_notify": True}).open()
    told.ch.send_cancel("ctag")
    told.ch.send(commands.Basic.QosOk())
    assert [x.NAME for x in told.methods()] == ["Basic.QosOk", "Basic.Cancel"]
    silent = Rig().open()
    silent.ch.send_cancel("ctag")
    assert silent.methods() == []


@pytest.mark.parametrize("size", [0, 10, 4088, 4089, 10000])
def test_deliveries_are_split_to_frame_max(size: int) -> None:
    rig = Rig().open()
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    rig.ch.send_deliver("ctag", 7, True, "ex", "rk", b"\x00\x00", data)
    frames = rig.written()
    deliver = decode(frames[0][2])
    assert (deliver.NAME, deliver.consumer_tag, deliver.delivery_tag, deliver.redelivered) == (
        "Basic.Deliver",
        "ctag",
        7,
        True,
    )
    assert frames[1][0] == 2 and struct.unpack_from(">HHQ", frames[1][2]) == (60, 0, size)
    bodies = [p for t, _, p in frames[2:]]
    assert all(t == BODY for t, _, _ in frames[2:]) and b"".join(bodies) == data
    assert all(len(p) <= 4096 - 8 for p in bodies)


def test_back_pressure_is_the_writers() -> None:
    rig = Rig().open()
    assert rig.ch.writable()
    rig.output.paused = True
    assert not rig.ch.writable()
