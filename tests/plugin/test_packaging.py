"""Packaging: the pytest plugin installs as ``fakerabbit_pytest`` (its source folder is ``conftest_plugin/``).

A project with a ``conftest_plugin`` package of its own must not collide with fakerabbit's plugin.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


def _declared_packages() -> tuple[list[str], dict[str, str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return list(setuptools["packages"]), dict(setuptools["package-dir"])


def test_every_package_folder_is_listed_in_pyproject() -> None:
    packages, package_dir = _declared_packages()
    assert package_dir == {"fakerabbit_pytest": "conftest_plugin"}
    found = sorted(".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "fakerabbit").rglob("__init__.py"))
    assert sorted(p for p in packages if p.startswith("fakerabbit.") or p == "fakerabbit") == found
    assert "fakerabbit_pytest" in packages and "conftest_plugin" not in packages


def test_the_entry_point_names_the_installed_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"fakerabbit": "fakerabbit_pytest.plugin"}
    import fakerabbit_pytest.plugin

    assert Path(fakerabbit_pytest.plugin.__file__).resolve() == ROOT / "conftest_plugin" / "plugin.py"


def test_a_wheel_holds_fakerabbit_pytest_and_no_conftest_plugin(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        pytest.skip(f"cannot build a wheel here (needs setuptools from the package index): {build.stderr[-300:]}")
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
        entry_points = next(z.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert tops == {"fakerabbit", "fakerabbit_pytest"}
    assert "fakerabbit_pytest/plugin.py" in names and "fakerabbit/management/__init__.py" in names
    assert "fakerabbit = fakerabbit_pytest.plugin" in entry_points


def test_a_project_with_its_own_conftest_plugin_package(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("conftest_plugin")
    pytester.makepyfile(**{"conftest_plugin/helpers": "ANSWER = 42\n"})
    pytester.makeconftest("pytest_plugins = ['conftest_plugin.helpers']\n")
    pytester.makepyfile(
        test_own="""
        from conftest_plugin.helpers import ANSWER

        def test_both(fakerabbit):
            assert ANSWER == 42 and fakerabbit.url.startswith("amqp://")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)
