"""TLS for the AMQP (amqps) and management (https) listeners.

- :class:`Certificates`: a certificate authority made when the node is created (with trustme), a server
  certificate for the names and addresses a client may use (``localhost``, ``127.0.0.1``, ``::1`` and the listening
  host) and a client certificate for mutual TLS, written as PEM files a client's SSL settings can point at.
- :func:`server_context`: the listeners' ``ssl.SSLContext``. Like a RabbitMQ node configured with
  ``ssl_options.verify = verify_peer`` and ``fail_if_no_peer_cert = false``: TLS 1.2 and 1.3 (RabbitMQ's default
  versions), a client certificate is asked for, checked against the CA when one is presented, and optional.
- :func:`tls_details`: what RabbitMQ reports of a TLS connection (``rabbit_ssl:info/2``, ``rabbit_cert_info``):
  ``ssl_protocol`` ``tlsv1.3``, the cipher suite as Erlang names it (``any`` / ``aes_256_gcm`` / ``aead``), the
  peer certificate's subject and issuer as RFC 4514 strings, its validity and serial number.
- :func:`drain_tls`: reads the encrypted bytes a client has sent but the loop has not read yet and passes them
  through the TLS layer, so that the virtual clock sees a publish sent just before ``advance()`` on amqps as it
  does on amqp (see ``Listener.drain_inbound``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import ssl
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Certificates", "TLSDetails", "drain_tls", "server_context", "tls_details"]

#: The subject organisation of the generated certificates.
ORGANIZATION = "fakerabbit"
#: Names and addresses every server certificate is valid for.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD = ("", "0.0.0.0", "::")


class Certificates:
    """A CA, a server certificate and a client certificate, as PEM files in ``directory`` (None: a new
    temporary directory, removed when this object is garbage-collected, at interpreter exit or by :meth:`remove`).

    Files: ``ca_certificate.pem`` (what a client trusts), ``server_certificate.pem`` / ``server_key.pem``,
    ``client_certificate.pem`` / ``client_key.pem`` (common name ``client_name``), the names RabbitMQ's TLS guide
    uses."""

    def __init__(self, host: str, *, client_name: str = "guest", directory: str | os.PathLike[str] | None = None):
        try:
            import trustme
        except ImportError as exc:  # pragma: no cover - a dependency of pytest-fakerabbit
            raise RuntimeError("TLS needs the trustme package: pip install trustme") from exc
        self._temporary = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="fakerabbit-tls-") if directory is None else directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.directory), True) if self._temporary else None
        ca = trustme.CA(organization_name=ORGANIZATION, organization_unit_name="fakerabbit CA")
        server = ca.issue_cert(
            *_names(host),
            common_name="fakerabbit",
            organization_name=ORGANIZATION,
            organization_unit_name="fakerabbit server",
        )
        client = ca.issue_cert(
            "client.fakerabbit.invalid",
            common_name=client_name or "client",
            organization_name=ORGANIZATION,
            organization_unit_name="fakerabbit client",
        )
        self.ca_file = str(self.directory / "ca_certificate.pem")
        self.server_cert = str(self.directory / "server_certificate.pem")
        self.server_key = str(self.directory / "server_key.pem")
        self.client_cert = str(self.directory / "client_certificate.pem")
        self.client_key = str(self.directory / "client_key.pem")
        ca.cert_pem.write_to_path(self.ca_file)
        # the server's chain: its certificate, then the CA's (RabbitMQ's certfile holds the leaf; the CA is sent
        # too so that a client trusting only an intermediate could verify, which does not arise here)
        _write(self.server_cert, b"".join(blob.bytes() for blob in server.cert_chain_pems))
        server.private_key_pem.write_to_path(self.server_key)
        _write(self.client_cert, b"".join(blob.bytes() for blob in client.cert_chain_pems))
        client.private_key_pem.write_to_path(self.client_key)
        for key in (self.server_key, self.client_key):
            os.chmod(key, 0o600)

    def remove(self) -> None:
        """Delete the files (the directory too when it was a temporary one)."""
        if self._cleanup is not None:
            self._cleanup()
            return
        for path in (self.ca_file, self.server_cert, self.server_key, self.client_cert, self.client_key):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _names(host: str) -> list[str]:
    """What the server certificate is issued for: the loopback names, the listening host, and for a wildcard
    host this machine's names (trustme refuses names that are not valid host names: those are left out)."""
    import socket

    names = list(LOOPBACK_NAMES)
    extra = [host] if host not in _WILDCARD else [socket.gethostname(), socket.getfqdn()]
    for name in extra:
        name = name.strip("[]").split("%", 1)[0]
        if name and name not in names and _valid_name(name):
            names.append(name)
    return names


def _valid_name(name: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        name.encode("idna")
    except UnicodeError:
        return False
    return all(part and len(part) <= 63 for part in name.rstrip(".").split("."))


def server_context(certs: Certificates) -> ssl.SSLContext:
    """The listeners' SSL context: TLS 1.2+, the generated server certificate, client certificates optional and
    verified against the CA when presented."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certs.server_cert, certs.server_key)
    ctx.load_verify_locations(certs.ca_file)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


# -- what RabbitMQ reports of a TLS connection --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TLSDetails:
    """A TLS connection's ``ssl_*`` and ``peer_cert_*`` items (``peer_cert_*`` None without a client
    certificate), formatted as RabbitMQ's management API shows them."""

    protocol: str
    key_exchange: str
    cipher: str
    hash: str
    peer_cert_subject: str | None = None
    peer_cert_issuer: str | None = None
    peer_cert_validity: str | None = None
    peer_cert_serial_number: str | None = None


def tls_details(ssl_object: Any) -> TLSDetails | None:
    """The details of the connection behind ``ssl_object`` (``ssl.SSLObject``/``ssl.SSLSocket``), None when
    there is none."""
    if ssl_object is None:
        return None
    version = ssl_object.version() or ""
    suite = ssl_object.cipher()
    name = suite[0] if suite else ""
    key_exchange, cipher, mac = _suite(ssl_object.context, name)
    subject = issuer = validity = serial = None
    der = ssl_object.getpeercert(binary_form=True)
    if der:
        subject, issuer, validity, serial = _cert_info(der)
    return TLSDetails(version.lower(), key_exchange, cipher, mac, subject, issuer, validity, serial)


def _suite(context: ssl.SSLContext, name: str) -> tuple[str, str, str]:
    """Erlang's ``selected_cipher_suite`` map of the OpenSSL suite ``name``: key exchange, cipher and MAC."""
    known = _SUITES.get(name)
    if known is None:
        known = _SUITES[name] = _lookup_suite(context, name)
    return known


_SUITES: dict[str, tuple[str, str, str]] = {}


def _lookup_suite(context: ssl.SSLContext, name: str) -> tuple[str, str, str]:
    for c in context.get_ciphers():
        if c.get("name") != name:
            continue
        kea = str(c.get("kea") or "").removeprefix("kx-")
        auth = str(c.get("auth") or "").removeprefix("auth-")
        key_exchange = "any" if kea == "any" else (kea if kea == "rsa" or auth in ("", "any") else f"{kea}_{auth}")
        cipher = str(c.get("symmetric") or "").replace("-", "_")
        digest = str(c.get("digest") or "")
        mac = "aead" if c.get("aead") else ("sha" if digest == "sha1" else digest)
        return key_exchange, cipher, mac
    return "", "", ""


#: ``rabbit_cert_info:format_rdn/1``'s attribute names, by OID.
_RDN_NAMES = {
    "2.5.4.4": "SN",
    "2.5.4.42": "GIVENNAME",
    "2.5.4.43": "INITIALS",
    "2.5.4.44": "GENERATIONQUALIFIER",
    "2.5.4.3": "CN",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.12": "TITLE",
    "2.5.4.6": "C",
    "2.5.4.5": "SERIALNUMBER",
    "2.5.4.65": "PSEUDONYM",
    "0.9.2342.19200300.100.1.25": "DC",
    "1.2.840.113549.1.9.1": "EMAILADDRESS",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.1": "UID",
}


def escape_rdn_value(value: str) -> str:
    """``rabbit_cert_info:escape_rdn_value/1``: RFC 4514 escaping, and every byte of the UTF-8 form outside
    printable ASCII as ``\\XX``."""
    data = value.encode("utf-8")
    out: list[str] = []
    for i, byte in enumerate(data):
        ch = chr(byte)
        if (i == 0 and ch in " #") or (i == len(data) - 1 and ch == " ") or ch in '"+,;<>\\':
            out.append("\\" + ch)
        elif byte < 32 or byte >= 126:
            out.append(f"\\{byte:02X}")
        else:
            out.append(ch)
    return "".join(out)


def format_name(name: Any) -> str:
    """``rabbit_cert_info:format_rdn_sequence/1`` of a ``cryptography`` ``x509.Name``: the last RDN first,
    multi-valued RDNs joined with ``+``."""
    rdns = []
    for rdn in name.rdns:
        parts = []
        for attr in rdn:
            oid = attr.oid.dotted_string
            value = attr.value if isinstance(attr.value, str) else attr.value.decode("utf-8", "replace")
            parts.append(f"{_RDN_NAMES.get(oid, oid)}={escape_rdn_value(value)}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


@functools.lru_cache(maxsize=64)
def _cert_info(der: bytes) -> tuple[str, str, str, str]:
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    validity = f"{cert.not_valid_before_utc.strftime(fmt)} - {cert.not_valid_after_utc.strftime(fmt)}"
    return format_name(cert.subject), format_name(cert.issuer), validity, format(cert.serial_number, "X")


# -- the virtual clock's drain ----------------------------------------------------------------------------------
def drain_tls(transport: Any, fd: int) -> bool:
    """Read what the client sent on the TLS connection of ``transport`` (socket ``fd``) and pass it through the
    TLS layer to the connection, as the loop would on its next turn. False when the event loop's TLS transport is
    not asyncio's own (uvloop): its bytes then wait for the loop."""
    proto = getattr(transport, "_ssl_protocol", None)
    if proto is None or not hasattr(proto, "get_buffer") or not hasattr(proto, "buffer_updated"):
        return False
    while not transport.is_closing():
        buf = proto.get_buffer(-1)
        try:
            n = os.readv(fd, [buf])
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break
        if n == 0:
            break
        proto.buffer_updated(n)
    return True
