"""The distribution as someone outside the repository gets it: the wheel the build hook makes
(setup.py: the console built and packed, migrations and policies inside the package),
installed into a fresh venv, started with its `authoric serve`."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ServerProcess, start_server
from tests.tree_lock import tree_lock

ROOT = Path(__file__).resolve().parents[2]
UV = str(Path(sys.executable).with_name("uv"))


def run(*args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    with tree_lock("wheel-build"):  # setuptools writes build/ and egg-info into the tree
        run(UV, "build", "--wheel", "--quiet", "--out-dir", str(out), str(ROOT), cwd=ROOT)
    (built,) = out.glob("authoric-*.whl")
    return built


@pytest.fixture(scope="module")
def served_from_wheel(wheel: Path, database_url: str,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("wheel-user")
    venv = home / "venv"
    run(UV, "venv", "--quiet", "--python", sys.executable, str(venv), cwd=home)
    python = str(venv / "bin" / "python")
    # The wheel's own dependency ranges, held to the runtime lock's pins.
    run(UV, "pip", "install", "--quiet", "--python", python, "-c", str(ROOT / "requirements.lock"),
        str(wheel), cwd=home)
    where = run(python, "-c", "import authoric; print(authoric.__file__)", cwd=home)
    assert where.startswith(str(venv)), where
    (home / "data").mkdir()
    proc = start_server(database_url, home / "data", command=(str(venv / "bin" / "authoric"),))
    yield proc
    proc.stop()


def test_the_wheel_carries_the_console_migrations_and_policies(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"authoric/console_dist/index.html", "authoric/migrations/env.py",
            "authoric/policies/model.conf"} <= names
    assert any(n.startswith("authoric/console_dist/assets/") and n.endswith(".js") for n in names)
    assert not any(n.startswith(("tests/", "console/", "bench/")) for n in names)


def test_a_user_who_installs_the_wheel_gets_a_ready_server_serving_the_console(
        served_from_wheel: ServerProcess) -> None:
    url = served_from_wheel.url
    assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
    page = httpx.get(f"{url}/console/", timeout=10)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    script = next(part.split('"')[0] for part in page.text.split('src="')[1:] if part.startswith("/console/"))
    asset = httpx.get(f"{url}{script}", timeout=10)
    assert asset.status_code == 200
    assert "javascript" in asset.headers["content-type"]
