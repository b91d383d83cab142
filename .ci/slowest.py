"""The N slowest tests of CI's passes, from their JUnit XML files (setup, call and teardown
together, as pytest's junitxml counts a test's time): `slowest.py N FILE...`."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def slowest(count: int, files: list[Path]) -> list[tuple[float, str, str]]:
    """(seconds, pass, test id) for the `count` slowest tests across `files`, slowest first."""
    found = []
    for path in files:
        if not path.exists():
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            test = f"{case.get('classname', '')}::{case.get('name', '')}"
            found.append((float(case.get("time", 0)), path.stem, test))
    return sorted(found, reverse=True)[:count]


def main() -> None:
    count, files = int(sys.argv[1]), [Path(arg) for arg in sys.argv[2:]]
    print(f"== the {count} slowest tests (seconds, pass, test)")
    for seconds, which, test in slowest(count, files):
        print(f"{seconds:8.1f}  {which:6}  {test}")


if __name__ == "__main__":
    main()
