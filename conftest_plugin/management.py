"""The real broker's management HTTP API, as dual mode uses it: per-worker vhosts, policies, the version.

Only the standard library (``urllib``): the plugin must work without extra dependencies.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlsplit

from .wire import AmqpUrl

#: The management port RabbitMQ's defaults (and the live brokers here) pair with an AMQP port: AMQP + 10000.
MANAGEMENT_PORT_OFFSET = 10000


class ManagementError(RuntimeError):
    """The management API refused a request, or could not be reached (``status`` 0)."""

    def __init__(self, status: int, method: str, path: str, text: str) -> None:
        super().__init__(f"{method} {path}: {status or 'unreachable'} {text}".rstrip())
        self.status = status


def default_management_url(target: AmqpUrl) -> str:
    """``http://HOST:AMQP_PORT+10000`` (5672 → 15672), where RabbitMQ's defaults put it; for ``amqps``
    ``https://HOST:AMQPS_PORT+10000`` (5671 → 15671, RabbitMQ's documented HTTPS port)."""
    scheme = "https" if target.tls else "http"
    return f"{scheme}://{target.url_host}:{target.port + MANAGEMENT_PORT_OFFSET}"


class ManagementClient:
    """A minimal blocking client of RabbitMQ's management HTTP API (basic auth with the AMQP URL's user)."""

    def __init__(
        self, base_url: str, user: str, password: str, *, timeout: float = 10.0, ca_file: str | None = None
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"management URL must be http(s)://host:port, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.user = user
        self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.timeout = timeout
        #: An https:// API's certificate is checked against ``ca_file`` (None: the system's CAs).
        self.ca_file = ca_file

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """``method path`` with a JSON body; the decoded JSON answer (``None`` when empty)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", self._auth)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            context = ssl.create_default_context(cafile=self.ca_file) if self.base_url.startswith("https:") else None
            with urllib.request.urlopen(req, timeout=self.timeout, context=context) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            try:
                decoded = json.loads(text)
                text = str(decoded.get("reason") or decoded.get("error") or text)
            except (ValueError, AttributeError):
                pass
            raise ManagementError(exc.code, method, path, text) from None
        except (OSError, ValueError) as exc:
            raise ManagementError(0, method, path, f"({self.base_url}: {exc})") from None
        return json.loads(raw) if raw.strip() else None

    # -- what dual mode needs -------------------------------------------------------------------------------
    def rabbitmq_version(self) -> str:
        """The broker's version (``GET /api/overview``): also proves the API answers and the user may use it."""
        return str(self.request("GET", "/api/overview")["rabbitmq_version"])

    def create_vhost(self, vhost: str) -> None:
        """Create ``vhost`` and give this client's user full permissions on it."""
        v = quote(vhost, safe="")
        self.request("PUT", f"/api/vhosts/{v}", {})
        self.request(
            "PUT",
            f"/api/permissions/{v}/{quote(self.user, safe='')}",
            {"configure": ".*", "write": ".*", "read": ".*"},
        )

    def delete_vhost(self, vhost: str) -> None:
        self.request("DELETE", f"/api/vhosts/{quote(vhost, safe='')}")

    def set_policy(
        self,
        vhost: str,
        name: str,
        pattern: str,
        definition: dict[str, Any],
        *,
        priority: int,
        apply_to: str,
        operator: bool = False,
    ) -> None:
        kind = "operator-policies" if operator else "policies"
        body = {"pattern": pattern, "definition": definition, "priority": priority, "apply-to": apply_to}
        self.request("PUT", f"/api/{kind}/{quote(vhost, safe='')}/{quote(name, safe='')}", body)

    def clear_policy(self, vhost: str, name: str, *, operator: bool = False) -> None:
        kind = "operator-policies" if operator else "policies"
        self.request("DELETE", f"/api/{kind}/{quote(vhost, safe='')}/{quote(name, safe='')}")
