"""``@for_versions("3.10", "4.0", "4.3")``: one copy of a conformance test per version profile.

Each copy carries ``@pytest.mark.rabbitmq_version(v)``, so the fake runs with that profile and only the live
brokers of that version run the real half. Use it for rules that differ between versions: the test body asserts
per ``broker.version`` / ``broker.at_least(...)`` and every profile is exercised on the fake as well.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import pytest

#: The versions that have a live broker in CI (3.10.8, 4.0.5, 4.3.6).
LIVE_VERSIONS = ("3.10", "4.0", "4.3")


def for_versions(*versions: str) -> Callable[[Callable[..., Any]], None]:
    """Register ``<test>_<v>`` copies of the decorated test in its module, one per version (no dots)."""
    chosen = versions or LIVE_VERSIONS

    def decorate(fn: Callable[..., Any]) -> None:
        module = sys.modules[fn.__module__]
        for version in chosen:

            @functools.wraps(fn)
            def copy(*args: Any, __fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
                return __fn(*args, **kwargs)

            name = f"{fn.__name__}_{version.replace('.', '')}"
            copy.__name__ = copy.__qualname__ = name
            marks = list(getattr(fn, "pytestmark", []))
            copy.pytestmark = [*marks, pytest.mark.rabbitmq_version(version).mark]  # type: ignore[attr-defined]
            setattr(module, name, copy)

    return decorate
