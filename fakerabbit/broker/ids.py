"""Generated names (a leaf)."""

from __future__ import annotations

import base64
import os

__all__ = ["new_tag"]


def new_tag(prefix: str) -> str:
    """RabbitMQ-style generated names: ``amq.ctag-`` / ``amq.gen-`` + 22 url-safe base64 characters."""
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
