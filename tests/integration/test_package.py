"""The package as users install it: a wheel and an sdist built from a copy of the tree
through the PEP 517 hooks, the wheel installed into a fresh virtualenv and run there.

The fresh environment gets the dependencies from this one's site-packages on PYTHONPATH
(offline, seconds); CodeWhale itself comes only from the wheel, which the test checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "config.example.toml")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The wheel and the sdist, built from a copy (building writes build/ and egg-info)."""
    scratch = tmp_path_factory.mktemp("package")
    tree = scratch / "tree"
    tree.mkdir()
    for name in SHIPPED:
        shutil.copy2(ROOT / name, tree / name, follow_symlinks=False)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("codewhale", "docs"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=ignore, symlinks=True)
    out = scratch / "dist"
    hooks = (
        # The hooks rewrite sys.argv: the folder is read from it once, first.
        "import sys; from setuptools import build_meta as b; out = sys.argv[1]; "
        "w = b.build_wheel(out); s = b.build_sdist(out); print('built', w, s)"
    )
    result = subprocess.run(
        [sys.executable, "-c", hooks, str(out)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    wheel, sdist = result.stdout.splitlines()[-1].split()[1:]
    return {"wheel": out / wheel, "sdist": out / sdist, "scratch": scratch}


def test_the_wheel_carries_the_licence_the_example_config_and_the_app_data(built):
    names = zipfile.ZipFile(built["wheel"]).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    for shipped in (
        "codewhale/data/config.example.toml",
        "codewhale/tui/app.tcss",
        "codewhale/data/agents/",
        "codewhale/data/prompts/",
    ):
        assert any(n.startswith(shipped) for n in names), shipped


def test_the_sdist_carries_the_docs_licence_and_example(built):
    with tarfile.open(built["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        example = archive.extractfile(
            next(m for m in archive.getmembers() if m.name.endswith("/config.example.toml"))
        )
        assert example is not None and b"every key with its default" in example.read()
    assert {"LICENSE", "README.md", "docs/CONFIG.md", "docs/TUI.md"} <= names
    assert "codewhale/data/config.example.toml" in names


def test_the_wheel_installed_in_a_fresh_venv_runs_version_and_config_init(built, tmp_path):
    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = environment / "bin" / "python"
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", built["wheel"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    home = tmp_path / "home"
    env = {
        "PATH": f"{environment / 'bin'}:{os.environ['PATH']}",
        "HOME": str(home),
        "CODEWHALE_HOME": str(home / "codewhale"),
        # The dependencies, from this environment; CodeWhale only from the wheel.
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
    }

    def codewhale(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [environment / "bin" / "codewhale", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )

    where = subprocess.run(
        [python, "-c", "import codewhale; print(codewhale.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert where.stdout.startswith(str(environment)), where.stdout + where.stderr
    version = codewhale("--version")
    assert version.returncode == 0 and version.stdout.startswith("codewhale "), version.stderr
    init = codewhale("config", "init")
    assert init.returncode == 0, init.stderr
    written = home / "codewhale" / "config" / "config.toml"
    assert written.read_text() == codewhale("config", "example").stdout
    assert "every key with its default" in written.read_text()
