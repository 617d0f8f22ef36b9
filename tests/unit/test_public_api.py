"""The public API is what ``fakerabbit.__all__`` lists: complete, documented, and cheap to import."""

from __future__ import annotations

import subprocess
import sys

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
