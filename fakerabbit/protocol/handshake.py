"""The handshake's pieces that need no connection: server-properties, SASL responses, tune-ok limits."""

from __future__ import annotations

import functools
import ipaddress
import struct
from typing import Any

from fakerabbit.broker import errors
from fakerabbit.broker.fields import FieldError, decode_table_pairs
from fakerabbit.broker.profile import Profile
from fakerabbit.protocol import framing


def server_properties(profile: Profile) -> list[tuple[str, str, Any]]:
    """``connection.start``'s server-properties in RabbitMQ's wire order, as (key, field type, value)."""
    capabilities = [
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
    return [
        ("capabilities", "F", {name: ("t", True) for name in capabilities}),
        ("cluster_name", "S", "rabbit@fakerabbit"),
        ("copyright", "S", profile.amqp.copyright),
        ("information", "S", "Licensed under the MPL 2.0. Website: https://rabbitmq.com"),
        ("platform", "S", f"Erlang/OTP {profile.amqp.erlang_otp}"),
        ("product", "S", "RabbitMQ"),
        ("version", "S", profile.server_version),
    ]


def parse_plain(response: bytes) -> tuple[str, str] | None:
    """rabbit_auth_mechanism_plain: exactly ``\\0user\\0password`` (no authorization identity)."""
    if not response.startswith(b"\x00"):
        return None
    parts = response[1:].split(b"\x00")
    if len(parts) != 2:
        return None
    return parts[0].decode("utf-8", "surrogateescape"), parts[1].decode("utf-8", "surrogateescape")


def parse_amqplain(response: bytes) -> tuple[str, str | None] | None:
    """rabbit_auth_mechanism_amqplain: a field table without its length prefix holding LOGIN and PASSWORD.

    Like ``lists:keyfind/3`` on the decoded table, the first LOGIN and the first PASSWORD count; a longstr or
    a binary is a string. None (a silent close) if the table does not parse, lacks either field or has a LOGIN
    of another type; a PASSWORD of another type comes back as None: the login is refused (403). Checked on
    3.10.8, 4.0.5 and 4.3.6."""
    try:
        pairs, _ = decode_table_pairs(struct.pack(">I", len(response)) + response, finite=True)
    except FieldError:
        return None
    found: dict[str, tuple[str, object]] = {}
    for key, field in pairs:
        found.setdefault(key, field)
    login, password = found.get("LOGIN"), found.get("PASSWORD")
    if login is None or password is None:
        return None
    user = _string(login)
    if user is None:
        return None
    return user, _string(password)


def _string(field: tuple[str, object]) -> str | None:
    tag, value = field
    if tag == "S":
        return str(value)
    if tag == "x" and isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return None


@functools.lru_cache(maxsize=256)  # once per connection: parsing costs more than the lookup
def is_loopback(address: str) -> bool:
    """``rabbit_net:is_loopback/1``: 127.x.x.x, ::1 and IPv4-mapped 127.x.x.x (an empty address: a Unix
    socket or a transport without a peer, taken as local)."""
    if not address:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        return ip.packed[0] == 127
    return ip == ipaddress.IPv6Address("::1")


def check_tune_ok(
    frame_max: int, channel_max: int, channel_limit: int, frame_limit: int, frame_min: int = framing.FRAME_MIN_SIZE
) -> None:
    """rabbit_reader:validate_negotiated_integer_value/3 for tune-ok's frame_max and channel_max (0 means "no
    limit", which is above the server's)."""
    for field, value, low, high in (
        ("frame_max", frame_max, frame_min, frame_limit),
        ("channel_max", channel_max, 1, channel_limit),
    ):
        if value != 0 and value < low:
            raise errors.NotAllowed(f"negotiated {field} = {value} is lower than the minimum allowed value ({low})")
        if value == 0 or value > high:
            detail = " (no limit)" if field == "channel_max" and value == 0 else ""
            raise errors.NotAllowed(
                f"negotiated {field} = {value}{detail} is higher than the maximum allowed value ({high})"
            )
