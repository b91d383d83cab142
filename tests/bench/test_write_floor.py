"""bench.write_floor, run small against the test database: an operator who runs it gets a
figure for each variant, in each round and as a median."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_operator_running_the_write_floor_gets_a_median_per_variant(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.write_floor", "--connections", "20", "--per-pass", "5",
         "--seconds", "0.5", "--rounds", "2"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": database_url}, capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "20 connections open" in done.stdout
    for variant in ("writes", "trip+writes", "trip"):
        row = re.search(rf"^\| {re.escape(variant)} \| (-?\d+), (-?\d+) \| (-?\d+) \|",
                        done.stdout, re.M)
        assert row, done.stdout
