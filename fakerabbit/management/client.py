"""The HTTP side of ``fakerabbit ctl``: a stdlib (urllib) management API client, errors, and rabbitmqctl's
output format."""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

EX_OK, EX_USAGE, EX_UNAVAILABLE = 0, 64, 69


class CtlError(Exception):
    """A command failed: ``message`` goes to stderr after ``Error:``."""

    def __init__(self, message: str, status: int = EX_UNAVAILABLE) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class HTTPFailure(CtlError):
    """The API answered with an error status."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


class Client:
    """A minimal management API client on urllib."""

    def __init__(
        self, url: str, username: str | None, password: str | None, timeout: float = 30.0, cafile: str | None = None
    ) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        self.username = username if username is not None else (parts.username or "guest")
        self.password = password if password is not None else (parts.password or "guest")
        host = parts.hostname or "127.0.0.1"
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
        self.base = urlunsplit((parts.scheme or "http", netloc, parts.path.rstrip("/"), "", ""))
        self.timeout = timeout
        #: How an https:// URL's certificate is verified: against ``cafile``, else the system's CAs.
        self.context: ssl.SSLContext | None = None
        if cafile:
            try:
                self.context = ssl.create_default_context(cafile=cafile)
            except (OSError, ssl.SSLError) as exc:
                raise CtlError(f"cannot read the CA certificate {cafile}: {exc}", EX_USAGE) from None

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        """Send a request; returns the parsed JSON answer (``None`` for an empty one)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            reason: Any = raw.decode("utf-8", "replace") or exc.reason
            with contextlib.suppress(ValueError, AttributeError):
                reason = json.loads(raw).get("reason", reason)
            if exc.code == 401 and reason == "Not_Authorized" and "www-authenticate" not in exc.headers:
                reason = "Login failed"  # RabbitMQ 4.x no longer says why; a wrong user name or password
            raise HTTPFailure(exc.code, reason if isinstance(reason, str) else json.dumps(reason)) from None
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", exc)
            raise CtlError(f"could not reach the management API at {self.base}: {why}") from None
        return json.loads(raw) if raw.strip() else None


def quote_segment(name: str) -> str:
    """A path segment (``/`` -> ``%2F``)."""
    return quote(name, safe="")


# -- output ---------------------------------------------------------------------------------------------------------
class Output:
    """rabbitmqctl's output: informational lines (hidden by ``-q``) and tab-separated tables."""

    def __init__(self, quiet: bool, headers: bool) -> None:
        self.quiet = quiet
        self.headers = headers

    def info(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

    def table(self, columns: Sequence[str], rows: list[list[Any]]) -> None:
        if self.headers:
            print("\t".join(columns))
        for row in rows:
            print("\t".join(_cell(v) for v in row))
        sys.stdout.flush()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
