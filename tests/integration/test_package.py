"""The package installs: ``python -m build`` makes an sdist and a wheel, and the wheel works in a fresh venv.

The build runs once per session (the sdist first, then the wheel from it, as ``python -m build``
does); a fresh venv (``python -m venv``) installs the wheel with its dependencies from the
package index, and the installed ``interlock`` command runs ``--version`` and the demo on the
scripted model, and every name of ``interlock.__all__`` imports.
"""

from __future__ import annotations

import email.parser
import os
import pathlib
import re
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from where import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
BUILD_TIMEOUT = 600.0
INSTALL_TIMEOUT = 600.0
RUN_TIMEOUT = 120.0


@dataclass(frozen=True)
class Built:
    sdist: pathlib.Path
    wheel: pathlib.Path


@dataclass(frozen=True)
class Installed:
    venv: pathlib.Path
    home: pathlib.Path

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env |= {"HOME": str(self.home), "XDG_DATA_HOME": str(self.home / "data")}
        return subprocess.run(
            [str(self.venv / "bin" / command[0]), *command[1:]],
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    assert done.returncode == 0, f"{what} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    _check(done, "python -m build")
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    return Built(sdist=sdist, wheel=wheel)


@pytest.fixture(scope="session")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    where = tmp_path_factory.mktemp("fresh")
    venv = where / "venv"
    _check(
        subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False), "venv"
    )
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, str(built.wheel)], capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
    )
    _check(done, f"pip install {built.wheel.name}")
    home = where / "home"
    home.mkdir()
    yield Installed(venv=venv, home=home)


pytestmark = pytest.mark.slow


def test_the_wheel_carries_the_metadata_and_the_licence(built: Built) -> None:
    assert built.wheel.name.startswith(f"interlock-{PROJECT['version']}-")
    with zipfile.ZipFile(built.wheel) as wheel:
        names = wheel.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(wheel.read(info).decode())
        licences = [n for n in names if re.search(r"\.dist-info/licenses/LICENSE$", n)]
        assert licences, names
        assert wheel.read(licences[0]) == (ROOT / "LICENSE").read_bytes()
    assert "interlock/py.typed" in names
    assert metadata["License-Expression"] == "Apache-2.0"
    assert set(metadata.get_all("Classifier") or []) == set(PROJECT["classifiers"])
    assert metadata["Keywords"] and "human-in-the-loop" in metadata["Keywords"]
    assert set(metadata.get_all("Provides-Extra") or []) == set(PROJECT["optional-dependencies"])


def test_the_sdist_carries_the_sources_docs_and_licence(built: Built) -> None:
    import tarfile

    with tarfile.open(built.sdist) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "src/interlock/__init__.py"} <= names


def test_the_installed_command_reports_the_version(installed: Installed) -> None:
    done = installed.run("interlock", "--version")
    _check(done, "interlock --version")
    assert done.stdout.strip() == f"interlock {PROJECT['version']}"


def test_the_installed_demo_runs_on_the_scripted_model(installed: Installed) -> None:
    done = installed.run("interlock", "demo", "--yes", "--model", "scripted")
    _check(done, "interlock demo --yes --model scripted")
    assert "PENDING APPROVAL  transferMoney: $150.00 to Alice" in done.stdout
    assert '"status": "sent"' in done.stdout and "balance now: $850.00" in done.stdout


def test_every_public_name_imports_from_the_installed_package(installed: Installed) -> None:
    script = (
        "import interlock, importlib.metadata as m\n"
        "missing = [n for n in interlock.__all__ if not hasattr(interlock, n)]\n"
        "assert not missing, missing\n"
        "assert interlock.__version__ == m.version('interlock'), interlock.__version__\n"
        "assert interlock.__file__ and 'site-packages' in interlock.__file__, interlock.__file__\n"
        "print(len(interlock.__all__), interlock.__version__)\n"
    )
    done = installed.run("python", "-c", script)
    _check(done, "import interlock")
    count, version = done.stdout.split()
    assert int(count) > 0 and version == PROJECT["version"]
