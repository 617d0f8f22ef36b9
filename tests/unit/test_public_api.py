"""The public API is what ``fakerabbit.__all__`` lists: complete, documented, and cheap to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import fakerabbit
import fakerabbit.testing


def test_all_names_exist_and_have_docstrings() -> None:
    for module in (fakerabbit, fakerabbit.testing):
        for name in module.__all__:
            obj = getattr(module, name)
            assert (obj.__doc__ or "").strip(), f"{module.__name__}.{name} has no docstring"


def test_all_lists_the_clocks_and_the_errors_the_api_raises() -> None:
    assert {"FakeRabbit", "VirtualClock", "FollowingClock", "SystemClock", "Clock"} <= set(fakerabbit.__all__)
    assert {"ManagementListenError", "PolicyError", "AMQPError", "SoftError", "HardError"} <= set(fakerabbit.__all__)
    assert issubclass(fakerabbit.ManagementListenError, OSError)
    assert issubclass(fakerabbit.PolicyError, ValueError)


def test_public_methods_of_fakerabbit_have_docstrings() -> None:
    missing = [
        name
        for name in dir(fakerabbit.FakeRabbit)
        if not name.startswith("_") and not (getattr(fakerabbit.FakeRabbit, name).__doc__ or "").strip()
    ]
    assert missing == []


def test_importing_fakerabbit_does_not_load_the_management_api() -> None:
    code = "import sys, fakerabbit; print(any(m.startswith('fakerabbit.management') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_internals_are_private() -> None:
    """``broker``, ``server`` and ``call`` were public once; they are internal now (issue 13) and gone."""
    rabbit = fakerabbit.FakeRabbit()
    for name in ("broker", "server", "call"):
        assert not hasattr(rabbit, name)


def test_set_permissions_and_set_alarm_replace_reaching_into_internals() -> None:
    rabbit = fakerabbit.FakeRabbit()
    rabbit.set_permissions("guest", "/", configure="^mine$", write="", read=".*")
    assert not rabbit._broker.auth.allows("guest", "/", "write", "exchange", "x")
    assert rabbit._broker.auth.allows("guest", "/", "configure", "queue", "mine")
    with pytest.raises(ValueError):
        rabbit.set_permissions("guest", "/", configure="(")
    rabbit.set_alarm("disk", True)
    assert rabbit._listener.alarms.blocking
    rabbit.set_alarm("disk", False)
    assert not rabbit._listener.alarms.blocking
    rabbit.set_permissions("guest", "/", write="^nothing$")
    rabbit.reset()
    assert rabbit._broker.auth.allows("guest", "/", "write", "exchange", "x")


def test_fakerabbit_and_the_plugins_real_rabbit_have_every_member_of_the_shared_protocol() -> None:
    """mypy checks the signatures (``fakerabbit/server.py``, ``conftest_plugin/real.py``); this checks, at run
    time, that neither side lacks a member of :class:`fakerabbit.testing.Rabbit`."""
    from fakerabbit.testing import Rabbit, RabbitClock, RabbitQueue
    from fakerabbit_pytest.real import RealClock, RealQueue, RealRabbit
    from fakerabbit_pytest.wire import AmqpUrl

    def members(protocol: type) -> set[str]:
        return {n for n in vars(protocol) if not n.startswith("_")}

    def has(obj: object, name: str) -> bool:  # without reading it: on RealRabbit some members skip the test
        cls = obj if isinstance(obj, type) else type(obj)
        return (
            hasattr(cls, name)
            or name in getattr(cls, "__dataclass_fields__", {})
            or name in getattr(obj, "__dict__", {})
        )

    fake = fakerabbit.FakeRabbit()
    real = RealRabbit(AmqpUrl.parse("amqp://guest:guest@127.0.0.1:1/%2F"), None, wait=False, server_version="4.3")
    assert members(Rabbit) >= {"url", "clock", "queue", "set_policy", "close_connections", "reset"}
    for protocol, objects in (
        (Rabbit, (fake, real)),
        (RabbitClock, (fakerabbit.VirtualClock(), fakerabbit.FollowingClock(), fakerabbit.SystemClock(), real.clock)),
        (RabbitQueue, (fakerabbit.testing.QueueSnapshot, RealQueue("q", "/", 0, 0, 0))),
    ):
        for obj in objects:
            assert [m for m in sorted(members(protocol)) if not has(obj, m)] == [], obj
    assert isinstance(real.clock, RealClock)
