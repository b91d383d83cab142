"""A newcomer asking the repository's scripts for help gets usage, not a run."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / "scripts" / args[0]), *args[1:]], capture_output=True,
                          text=True, timeout=30, cwd=ROOT)


def test_a_newcomer_asking_scripts_test_for_help_gets_usage_and_nothing_runs() -> None:
    for flag in ("--help", "-h"):
        done = run("test", flag)
        assert done.returncode == 0
        assert done.stdout.startswith("usage: scripts/test [PYTEST ARGS...]")
        assert "AUTHORIC_TEST_DATABASE_URL" in done.stdout
        assert done.stderr == ""


def test_a_newcomer_giving_scripts_setup_a_wrong_option_gets_usage_and_exit_2() -> None:
    done = run("setup", "--nope")
    assert done.returncode == 2
    assert "usage: scripts/setup [--runtime]" in done.stderr
