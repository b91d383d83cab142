"""Where the files that ship beside the code are: `migrations/` and `policies/`.

In a checkout (the editable install scripts/setup makes) they are the repository's top-level
directories; in an installed wheel they are inside the `authoric` package, where setup.py's
build hook copies them. The built console is always inside the package (`console_dist/`).
"""

from __future__ import annotations

from pathlib import Path


def shipped_dir(name: str) -> Path:
    """The directory `name` (`migrations` or `policies`) of this installation."""
    package = Path(__file__).resolve().parent
    inside = package / name
    return inside if inside.is_dir() else package.parents[1] / name
