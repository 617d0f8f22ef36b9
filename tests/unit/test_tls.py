"""TLS pieces: the generated certificates, and what RabbitMQ reports of a TLS connection, formatted as
``rabbit_cert_info`` and ``rabbit_ssl:info/2`` do (cases from RabbitMQ's ``unit_rabbit_cert_info_SUITE``)."""

from __future__ import annotations

import datetime as dt
import gc
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fakerabbit.protocol.tls import (
    Certificates,
    _cert_info,
    _lookup_suite,
    escape_rdn_value,
    format_name,
    server_context,
)


def self_signed(name: x509.Name, serial: int) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(dt.datetime(2025, 1, 1, tzinfo=dt.UTC))
        .not_valid_after(dt.datetime(2035, 1, 1, tzinfo=dt.UTC))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def cn(value: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, value)])


@pytest.mark.parametrize(
    ("serial", "text"),
    [
        (1, "1"),  # shortest_serial_number
        (0xABCDEF, "ABCDEF"),  # common_serial_number_length
        (0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF, "7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"),  # 20 octets
        (0xDEADBEEF, "DEADBEEF"),  # uppercase hex
        (0x0123456789ABCDEF, "123456789ABCDEF"),  # no leading zero: integer_to_list(SN, 16)
    ],
)
def test_serial_number_as_rabbit_cert_info(serial: int, text: str) -> None:
    assert _cert_info(self_signed(cn("Serial"), serial))[3] == text


def test_subject_issuer_and_validity_of_a_self_signed_certificate() -> None:
    subject, issuer, validity, _ = _cert_info(self_signed(cn("SanityCheck"), 7))
    assert subject == issuer == "CN=SanityCheck"
    assert validity == "2025-01-01T00:00:00Z - 2035-01-01T00:00:00Z"


def test_names_are_written_last_rdn_first_with_rabbitmq_attribute_names() -> None:
    name = x509.Name(
        [
            x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COUNTRY_NAME, "GB")]),
            x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Ltd")]),
            x509.RelativeDistinguishedName(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "app"),
                    x509.NameAttribute(NameOID.EMAIL_ADDRESS, "ops@example.com"),
                ]
            ),
        ]
    )
    # cryptography orders a multi-valued RDN's attributes by their DER encoding
    assert format_name(name) in (
        "CN=app+EMAILADDRESS=ops@example.com,O=Acme\\, Ltd,C=GB",
        "EMAILADDRESS=ops@example.com+CN=app,O=Acme\\, Ltd,C=GB",
    )


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("plain", "plain"),
        (" lead", "\\ lead"),
        ("#hash", "\\#hash"),
        ("mid#dle", "mid#dle"),
        ("trail ", "trail\\ "),
        ('a"b+c,d;e<f>g\\h', 'a\\"b\\+c\\,d\\;e\\<f\\>g\\\\h'),
        ("tab\there", "tab\\09here"),
        ("tilde~", "tilde\\7E"),  # RabbitMQ escapes every byte >= 126
        ("λ", "\\CE\\BB"),  # non-ASCII: the UTF-8 bytes
    ],
)
def test_escape_rdn_value(value: str, escaped: str) -> None:
    assert escape_rdn_value(value) == escaped


@pytest.mark.parametrize(
    ("suite", "erlang"),
    [
        ("TLS_AES_256_GCM_SHA384", ("any", "aes_256_gcm", "aead")),
        ("TLS_CHACHA20_POLY1305_SHA256", ("any", "chacha20_poly1305", "aead")),
        ("ECDHE-ECDSA-AES256-GCM-SHA384", ("ecdhe_ecdsa", "aes_256_gcm", "aead")),
        ("ECDHE-RSA-AES128-GCM-SHA256", ("ecdhe_rsa", "aes_128_gcm", "aead")),
        ("ECDHE-RSA-AES256-SHA384", ("ecdhe_rsa", "aes_256_cbc", "sha384")),
        ("DHE-RSA-AES128-SHA256", ("dhe_rsa", "aes_128_cbc", "sha256")),
    ],
)
def test_cipher_suites_are_named_as_erlang_names_them(suite: str, erlang: tuple[str, str, str]) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if suite not in {c["name"] for c in ctx.get_ciphers()}:
        pytest.skip(f"this OpenSSL does not offer {suite}")
    assert _lookup_suite(ctx, suite) == erlang


def test_the_generated_files_verify_as_a_client_would(tmp_path: Path) -> None:
    certs = Certificates("127.0.0.1", client_name="alice", directory=tmp_path / "tls")
    assert sorted(p.name for p in (tmp_path / "tls").iterdir()) == [
        "ca_certificate.pem",
        "client_certificate.pem",
        "client_key.pem",
        "server_certificate.pem",
        "server_key.pem",
    ]
    assert os.stat(certs.server_key).st_mode & 0o077 == 0
    server = x509.load_pem_x509_certificate(Path(certs.server_cert).read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost"} <= set(sans.get_values_for_type(x509.DNSName))
    assert {"127.0.0.1", "::1"} <= {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    client = x509.load_pem_x509_certificate(Path(certs.client_cert).read_bytes())
    assert format_name(client.subject) == "CN=alice,OU=fakerabbit client,O=fakerabbit"
    ctx = server_context(certs)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    certs.remove()
    assert not Path(certs.ca_file).exists() and (tmp_path / "tls").is_dir()  # a directory it was given stays


def test_a_temporary_directory_goes_with_the_object() -> None:
    certs = Certificates("::1")
    directory = certs.directory
    assert directory.is_dir()
    del certs
    gc.collect()
    assert not directory.exists()


def test_a_named_listening_host_is_in_the_server_certificate(tmp_path: Path) -> None:
    certs = Certificates("rabbit.example", directory=tmp_path)
    server = x509.load_pem_x509_certificate(Path(certs.server_cert).read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "rabbit.example" in sans.get_values_for_type(x509.DNSName)
