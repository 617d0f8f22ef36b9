"""The layer rules of shared/design/architecture.md, checked on the source (imports read with ``ast``).

- ``broker/`` never imports ``protocol/`` (or anything above it), pamqp, sockets, threads or asyncio, and never
  reads the wall clock: its time comes from the injected clock.
- Only ``protocol/framing.py`` and ``protocol/codec.py`` import pamqp; the rest of ``protocol/`` goes through
  ``codec``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fakerabbit"
BROKER_FORBIDDEN = (
    "fakerabbit.protocol",
    "fakerabbit.server",
    "fakerabbit.management",
    "fakerabbit.testing",
    "fakerabbit.cli",
    "pamqp",
    "socket",
    "threading",
    "asyncio",
    "time",
)
PAMQP_ALLOWED = {"protocol/framing.py", "protocol/codec.py"}


def modules(sub: str = "") -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import, ``from x import y`` giving ``x``; relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[: -node.level]
                base = ".".join(parts)
                out.append((node.lineno, f"{base}.{node.module}" if node.module else base))
            elif node.module is not None:
                out.append((node.lineno, node.module))
    return out


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("path", modules("broker"), ids=lambda p: p.name)
def test_the_broker_model_imports_nothing_above_it(path: Path) -> None:
    bad = [(line, m) for line, m in imports(path) if any(_matches(m, f) for f in BROKER_FORBIDDEN)]
    assert bad == []


def test_only_framing_and_codec_import_pamqp() -> None:
    offenders = []
    for path in modules():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in PAMQP_ALLOWED:
            continue
        offenders += [(rel, line) for line, m in imports(path) if _matches(m, "pamqp")]
    assert offenders == []


def test_the_checks_see_imports() -> None:
    """The scanner itself: it finds the pamqp imports where they are allowed, and the broker's own imports."""
    assert any(_matches(m, "pamqp") for _, m in imports(PACKAGE / "protocol" / "codec.py"))
    assert any(m == "fakerabbit.clock" for _, m in imports(PACKAGE / "broker" / "queue.py"))
