"""What the machine's network offers the TLS and IPv6 tests: IPv6 loopback, dual-stack sockets."""

from __future__ import annotations

import socket

import pytest


def _ipv6_loopback_problem() -> str | None:
    if not socket.has_ipv6:
        return "Python was built without IPv6"
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError as exc:
        return f"no IPv6 loopback on this machine (binding ::1: {exc.strerror}; see `ip -6 addr`)"
    return None


IPV6_PROBLEM = _ipv6_loopback_problem()
#: Skips a test on a machine without IPv6 loopback (``::1``), with the reason.
needs_ipv6 = pytest.mark.skipif(IPV6_PROBLEM is not None, reason=IPV6_PROBLEM or "")
#: Skips a test where ``::`` cannot accept IPv4 as well (``net.ipv6.bindv6only=1``, some BSDs).
needs_dualstack = pytest.mark.skipif(
    IPV6_PROBLEM is not None or not socket.has_dualstack_ipv6(),
    reason=IPV6_PROBLEM or "the OS gives no dual-stack IPv6 sockets (IPV6_V6ONLY cannot be turned off)",
)
