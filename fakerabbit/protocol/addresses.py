"""Listening addresses, IPv4 and IPv6: which sockets a ``host`` means, and how addresses are written.

RabbitMQ resolves a listener's host for both families (``rabbit_networking:tcp_listener_addresses/1``), so
``localhost`` listens on ``127.0.0.1`` and ``::1``; ``::`` accepts IPv4 too where the OS allows dual-stack sockets.
Every socket of one listener gets the same port (with port 0, the one the first socket was given). Addresses are
written as RabbitMQ writes them: ``rabbit_misc:ntoa/1`` (IPv4-mapped IPv6 addresses as IPv4: ``::ffff:127.0.0.1``
is ``127.0.0.1``) for ``peer_host``, ``rabbit_misc:ntoab/1`` (IPv6 in brackets) in connection names and URLs.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
import socket

__all__ = ["bind", "host_port", "ip_text", "url_host"]

#: Bind attempts with port 0 when a later family finds the first one's port taken.
_PORT_ATTEMPTS = 20
#: What a failed bind of one of ``localhost``'s two addresses may say when the machine lacks that family.
_NO_FAMILY = {errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT}


@functools.lru_cache(maxsize=256)  # every connection's peer goes through it: parsing costs more than the lookup
def ip_text(address: str) -> str:
    """``rabbit_misc:ntoa/1``: an IPv4-mapped IPv6 address as IPv4, a scope id dropped, anything else unchanged."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def url_host(host: str) -> str:
    """``host`` as a URL's host part: IPv6 addresses in brackets (``[::1]``), names and IPv4 unchanged."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_port(address: object) -> tuple[str, int]:
    """(host, port) of a socket address tuple (``getpeername``/``getsockname``), the host as :func:`ip_text`;
    ``("", 0)`` for anything else (a Unix socket, a transport without one)."""
    if isinstance(address, tuple) and len(address) >= 2:
        return ip_text(str(address[0])), int(address[1])
    return "", 0


def _targets(host: str) -> list[tuple[socket.AddressFamily, str, bool]]:
    """(family, address, optional) to bind for ``host``; an optional address is skipped when the machine lacks
    its family."""
    if host == "localhost":
        return [(socket.AF_INET, "127.0.0.1", False), (socket.AF_INET6, "::1", True)]
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    else:
        if isinstance(ip, ipaddress.IPv4Address):
            return [(socket.AF_INET, host, False)]
        if ip.is_unspecified and not socket.has_dualstack_ipv6():
            return [(socket.AF_INET6, host, False), (socket.AF_INET, "0.0.0.0", True)]
        return [(socket.AF_INET6, host, False)]
    seen: list[tuple[socket.AddressFamily, str, bool]] = []
    for family, _, _, _, sockaddr in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
        entry = (socket.AddressFamily(family), str(sockaddr[0]), bool(seen))
        if family in (socket.AF_INET, socket.AF_INET6) and entry[:2] not in [s[:2] for s in seen]:
            seen.append(entry)
    return seen


def _listen_socket(family: socket.AddressFamily, address: str, port: int) -> socket.socket:
    """A listening socket (the errors are the OS's own: ``socket.create_server`` would reword them)."""
    sockaddr = socket.getaddrinfo(address, port, family, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)[0][4]
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP (base_events._set_nodelay),
    # and accepted sockets inherit it; without it Nagle holds a delivery written after a confirm for ~40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if os.name not in ("nt", "cygwin"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's create_server
        if family == socket.AF_INET6:
            dualstack = ipaddress.ip_address(address.split("%", 1)[0]).is_unspecified and socket.has_dualstack_ipv6()
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dualstack else 1)
        sock.bind(sockaddr)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (an address, ``localhost``, ``::`` or a name), all on one port (``port``, or
    with 0 a free one). Raises ``OSError`` when the host cannot be listened on (an IPv6 address on a machine
    without IPv6: ``EADDRNOTAVAIL``)."""
    targets = _targets(host)
    if not targets:
        raise OSError(errno.EADDRNOTAVAIL, f"{host} has no IPv4 or IPv6 address")
    for attempt in range(_PORT_ATTEMPTS):
        socks: list[socket.socket] = []
        try:
            chosen = port
            for family, address, optional in targets:
                try:
                    sock = _listen_socket(family, address, chosen)
                except OSError as exc:
                    if optional and socks and exc.errno in _NO_FAMILY:
                        continue
                    raise
                socks.append(sock)
                chosen = int(sock.getsockname()[1])
            return socks
        except OSError as exc:
            for s in socks:
                s.close()
            if port == 0 and socks and exc.errno == errno.EADDRINUSE and attempt + 1 < _PORT_ATTEMPTS:
                continue  # the free port of the first family is taken in another: pick again
            raise
    raise AssertionError("unreachable")  # pragma: no cover
