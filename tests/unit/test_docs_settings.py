"""The settings and the docs agree: docs/configuration.md names the environment variable of
every field of `Settings` (platform/authoric/settings.py), and every `AUTHORIC_*` variable a
page of the docs names is still read somewhere in the repository (a setting, a test-only
switch, a script or the compose file). A new setting without its line, or a line for a
setting that is gone, fails here."""

from __future__ import annotations

import re
from pathlib import Path

from authoric.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = re.compile(r"\bAUTHORIC_[A-Z0-9_]*[A-Z0-9]\b")
# where a variable the docs name may be read: code, scripts, CI, the image and compose
READERS = ("platform", "tests", "bench", "scripts", ".ci", "deploy", "clients", "examples",
           "compose.yaml", "Dockerfile")


def variables() -> dict[str, str]:
    """Each field of Settings and the environment variable that sets it."""
    return {name: str(field.validation_alias) for name, field in Settings.model_fields.items()}


def read_in_repository() -> str:
    files: list[Path] = []
    for reader in READERS:
        path = ROOT / reader
        files += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()
                                                 and "node_modules" not in p.parts
                                                 and p.suffix in ("", ".py", ".ts", ".sh",
                                                                  ".yaml", ".yml", ".conf")]
    return "\n".join(p.read_text(errors="replace") for p in files)


def test_configuration_md_names_the_variable_of_every_setting() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    found = variables()
    assert len(found) > 30  # the settings were read
    missing = sorted(v for v in found.values() if f"`{v}`" not in page)
    assert missing == []


def test_every_authoric_variable_the_docs_name_is_read_somewhere() -> None:
    named: dict[str, str] = {}
    for page in sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md",
                        ROOT / "bench" / "README.md"]):
        for variable in VARIABLE.findall(page.read_text()):
            named.setdefault(variable, str(page.relative_to(ROOT)))
    assert len(named) > 30
    known = set(variables().values()) | set(VARIABLE.findall(read_in_repository()))
    gone = sorted(f"{page}: {variable}" for variable, page in named.items()
                  if variable not in known)
    assert gone == []
