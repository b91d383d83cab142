"""The build hook: a wheel or sdist of Authoric carries the built admin console.

Everything else about the distribution is declared in pyproject.toml. Building a wheel from a
checkout (`python -m build`, `uv build`) runs `scripts/console build` first (skipped when the
console's sources are unchanged since the last build), then puts the console, `migrations/` and
`policies/` inside the `authoric` package, where a non-editable install finds them. An sdist
carries the built console, so a wheel built from it needs no Node. An editable install
(`scripts/setup`) builds nothing: the checkout's own directories serve.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
BUILT_CONSOLE = ROOT / "platform" / "authoric" / "console_dist" / "index.html"
SHIPPED_DIRS = ("migrations", "policies")


def build_console() -> None:
    script = ROOT / "scripts" / "console"
    if script.exists():
        subprocess.run([str(script), "build"], check=True)
    if not BUILT_CONSOLE.exists():
        raise SystemExit(f"the admin console is not built ({BUILT_CONSOLE} is missing)")


class BuildPy(build_py):
    def run(self) -> None:
        if not self.editable_mode:
            build_console()
            # A build directory left by an earlier build keeps the console's old hashed assets.
            shutil.rmtree(Path(self.build_lib) / "authoric" / "console_dist", ignore_errors=True)
        super().run()
        if not self.editable_mode:
            for name in SHIPPED_DIRS:
                target = Path(self.build_lib) / "authoric" / name
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(ROOT / name, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


class Sdist(sdist):
    def run(self) -> None:
        build_console()
        super().run()


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
