"""The layer rules of docs/architecture.md, checked on the source (imports read with ``ast``).

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


#: What the layers under the composition root (server.py) may not import: it, the CLI and the package root
#: (which re-exports ``FakeRabbit``). They reach the listener or the broker, never ``FakeRabbit``/``Server``.
ROOT_MODULES = ("fakerabbit.server", "fakerabbit.cli", "fakerabbit.__main__")
LOWER_LAYERS = ("broker", "protocol", "management", "testing")


@pytest.mark.parametrize(
    "path",
    [p for layer in LOWER_LAYERS for p in modules(layer)],
    ids=lambda p: p.relative_to(PACKAGE).as_posix(),
)
def test_lower_layers_do_not_import_the_composition_root(path: Path) -> None:
    bad = [(line, m) for line, m in imports(path) if m == "fakerabbit" or any(_matches(m, r) for r in ROOT_MODULES)]
    assert bad == []


@pytest.mark.parametrize("path", modules("protocol"), ids=lambda p: p.name)
def test_the_protocol_layer_imports_neither_management_nor_testing(path: Path) -> None:
    above = ("fakerabbit.management", "fakerabbit.testing")
    bad = [(line, m) for line, m in imports(path) if any(_matches(m, a) for a in above)]
    assert bad == []


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


# -- import cycles -------------------------------------------------------------------------------------------
# Every import counts, ``if TYPE_CHECKING:`` ones and imports inside functions included: a type-only import is
# still a dependency a reader must follow. ``from pkg import name`` depends on ``pkg.name`` when that is a module.
ROOTS = (PACKAGE, PACKAGE.parent / "conftest_plugin")

#: Cycles not yet removed, each the set of modules of one strongly connected component. A cycle must stay inside
#: one of these sets; an entry that is no longer a cycle must go. Shrink only: issue 13 emptied it (the last one
#: was protocol/'s AMQPConnection spliced over seven modules), so any cycle now fails test_no_import_cycles.
KNOWN_CYCLES: tuple[frozenset[str], ...] = ()


def module_graph() -> dict[str, set[str]]:
    """Module name -> the package modules it imports."""
    files: dict[str, Path] = {}
    for root in ROOTS:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(m for a in node.names if (m := owner(a.name)))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module or ""
                for a in node.names:
                    m = f"{base}.{a.name}" if f"{base}.{a.name}" in files else owner(base)
                    if m:
                        deps.add(m)
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(frozenset(comp))
    return found


def test_no_import_cycles() -> None:
    """Dependencies point down only: no module reaches, even for a type, one that (indirectly) imports it."""
    new = [sorted(c) for c in cycles(module_graph()) if not any(c <= known for known in KNOWN_CYCLES)]
    assert new == []


def test_known_cycles_are_still_cycles() -> None:
    """A cycle that was removed leaves KNOWN_CYCLES, so it cannot come back unnoticed."""
    found = cycles(module_graph())
    stale = [sorted(k) for k in KNOWN_CYCLES if not any(c <= k and len(c) > 1 for c in found)]
    assert stale == []


def test_only_the_listener_names_the_connection() -> None:
    """The connection is composed of collaborators (output, dispatch, channel0, error_handling, throttle,
    heartbeat, channel, handlers) that each declare what they need of it as a Protocol: only the listener, which
    creates connections, imports the module (``from pkg import mod`` included)."""
    users = sorted(name for name, deps in module_graph().items() if "fakerabbit.protocol.connection" in deps)
    assert users == ["fakerabbit.protocol.listener"]


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"} - {"e"}}
    assert cycles(graph) == [frozenset("abc")]
    assert "fakerabbit.broker.queue" in module_graph()["fakerabbit.broker.vhost"]
