"""Every command the docs show still exists: `scripts/...` and their options, `authoric`
subcommands and their flags, `python -m bench.X` modules and their flags, and every repository
path they name, in fenced and indented code blocks and in code spans. Reads every page under
docs/ and the README, so new pages are covered as they are added."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from authoric.cli import parser

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL = {"", "sh", "bash", "shell", "console"}
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# Folders of this repository: a path starting with one of them must exist.
FOLDERS = ("platform", "tests", "bench", "scripts", "docs", "clients", "console", "deploy",
           "migrations", "examples", "policies", ".ci")
PATH = re.compile(rf"^(?:\./)?(?:{'|'.join(re.escape(f) for f in FOLDERS)})/[\w.@/-]*$")
PREFIXES = ("sudo", "nice", "time", "exec", "env")


def pages() -> list[Path]:
    return sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md", ROOT / "bench" / "README.md"])


@dataclass(frozen=True)
class Shown:
    """One command or path as a page shows it."""

    page: str
    text: str

    def __str__(self) -> str:
        return f"{self.page}: {self.text}"


def fenced_commands(text: str) -> Iterator[str]:
    """Each command of the shell blocks: prompts dropped, continued lines joined, and a
    line cut at `&&`, `||`, `;` and `|`."""
    for lang, body in FENCE.findall(text):
        if lang not in SHELL:
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        for line in joined.splitlines():
            line = re.sub(r"^\s*\$\s+", "", line).strip()
            if not line or line.startswith("#"):
                continue
            yield from (part.strip() for part in re.split(r"&&|\|\||;|\|", line) if part.strip())


COMMAND_START = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\./)?(?:scripts/\w|\.ci/\w|authoric |\.venv/bin/|python3? -m )")
INDENTED = re.compile(r"(?:\A|\n[ \t]*\n)((?: {4,}\S[^\n]*(?:\n|\Z))+)")


def indented_commands(text: str) -> Iterator[str]:
    """Commands of the indented code blocks (four spaces, after a blank line, outside the
    fences): only lines that start like a command we can check, since a list item's
    continued paragraph is indented too."""
    for block in INDENTED.findall(FENCE.sub("", text)):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"^\s*\$\s+", "", line).strip()
            if COMMAND_START.match(line):
                yield from (part.strip() for part in re.split(r"&&|\|\||;|\|", line)
                            if part.strip())


def inline_commands(text: str) -> Iterator[str]:
    """Code spans in the prose that start like a command we can check."""
    for span in SPAN.findall(text):
        if re.match(r"^(?:\./)?(?:scripts/\w|\.ci/\w|authoric |\.venv/bin/|python3? -m bench\.)",
                    span):
            yield span


def words(command: str) -> list[str]:
    try:
        found = shlex.split(command, comments=True)
    except ValueError:  # an unbalanced quote in an excerpt: the plain words will do
        found = command.split()
    while found and (re.match(r"^[A-Z_][A-Z0-9_]*=", found[0]) or found[0] in PREFIXES):
        found = found[1:]
    return found


def shown_commands() -> list[Shown]:
    found = []
    for page in pages():
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        found += [Shown(name, c) for c in (*fenced_commands(text), *indented_commands(text),
                                            *inline_commands(text))]
    return found


def flags(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if re.match(r"^--?[A-Za-z]", a)]


def authoric_problem(args: list[str]) -> str | None:
    """What is wrong with `authoric ARGS`, if anything."""
    root = parser()
    subs = next(a for a in root._actions if a.dest == "command").choices
    assert isinstance(subs, dict)
    if not args or args[0] in ("-h", "--help"):
        return None
    if args[0] not in subs:
        return f"no subcommand {args[0]!r} (there are {sorted(subs)})"
    known = {o for action in subs[args[0]]._actions for o in action.option_strings}
    unknown = [f for f in flags(args[1:]) if f not in known]
    return f"`authoric {args[0]}` has no {unknown}" if unknown else None


def bench_problem(module: str, args: list[str]) -> str | None:
    """What is wrong with `python -m MODULE ARGS` for a module under bench/, if anything
    (`bench.X` and `bench.<name>` are placeholders, not modules)."""
    if re.search(r"[<>{}]|\.[A-Z]$", module):
        return None
    rel = Path(*module.split("."))
    if (ROOT / rel).is_dir():
        if not (ROOT / rel / "__main__.py").exists():
            return f"{module} is a package without __main__.py"
        source = "".join(p.read_text() for p in (ROOT / rel).rglob("*.py"))
    elif (ROOT / rel.with_suffix(".py")).exists():
        source = (ROOT / rel.with_suffix(".py")).read_text()
    else:
        return f"no module {module}"
    unknown = [f for f in flags(args) if f not in ("-h", "--help") and f'"{f}"' not in source]
    return f"{module} has no {unknown}" if unknown else None


def script_problem(script: str, args: list[str]) -> str | None:
    """What is wrong with `SCRIPT ARGS` for a script of this repository, if anything."""
    path = ROOT / script.removeprefix("./")
    if not path.is_file():
        return f"no file {script}"
    if path.suffix == ".py":  # named, run by python: being there is enough
        return None
    if not path.stat().st_mode & 0o111:
        return f"{script} is not executable"
    source = path.read_text()
    if path.name == "serve" and path.parent.name == "scripts":  # `authoric serve "$@"`
        return authoric_problem(["serve", *args])
    if any(("\"$@\"" in line or "\"${@}\"" in line) and "() {" not in line
           for line in source.splitlines()):  # it hands its arguments on (scripts/test: pytest)
        return None
    unknown = [f for f in flags(args) if f not in ("-h", "--help") and f not in source]
    subcommand = args[0] if args and not args[0].startswith("-") else None
    if (subcommand and re.search(r'case "\$\{?1', source)
            and not re.search(rf"(?:^|[\s|(]){re.escape(subcommand)}(?:\)|\|)", source, re.M)):
        unknown.append(subcommand)
    return f"{script} knows no {unknown}" if unknown else None


def problem(command: str) -> str | None:
    found = words(command)
    if not found:
        return None
    head, args = found[0], found[1:]
    if re.match(r"^(?:\./)?(?:scripts|\.ci)/", head):
        return script_problem(head, args)
    if head == "authoric" or head.endswith("/authoric"):
        return authoric_problem(args)
    if re.match(r"^(?:.*/)?python[\d.]*$", head) and args[:1] == ["-m"] and len(args) > 1:
        if args[1] == "authoric.cli":
            return authoric_problem(args[2:])
        if args[1].startswith("bench."):
            return bench_problem(args[1], args[2:])
    return None


def shown_paths() -> list[Shown]:
    found = []
    for page in pages():
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        candidates = [*SPAN.findall(text), *(w for c in fenced_commands(text) for w in words(c)),
                      *(w for c in indented_commands(text) for w in words(c))]
        for candidate in candidates:
            path = re.sub(r"(?:[:#].*|[.,)]+)$", "", candidate.strip())
            if PATH.match(path):
                found.append(Shown(name, path))
    return found


def test_every_command_the_docs_show_runs_a_script_subcommand_module_and_flags_that_exist() -> None:
    commands = shown_commands()
    assert len(commands) > 50  # the docs do show commands: the extraction found them
    wrong = [f"{shown}: {why}" for shown in commands if (why := problem(shown.text))]
    assert wrong == []


def made_by_a_tool(path: str) -> bool:
    """Whether `path` lies under a folder .gitignore lists at the top (console/.node is made
    by scripts/console, bench/results/ by the benchmarks): named in docs, never committed."""
    ignored = [line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if "/" in line.strip().rstrip("/") and "*" not in line]
    return any(path == folder or path.startswith(f"{folder}/") for folder in ignored)


def test_every_repository_path_the_docs_name_exists() -> None:
    paths = shown_paths()
    assert len(paths) > 50
    missing = sorted({str(p) for p in paths if not made_by_a_tool(p.text.removeprefix("./"))
                      and not (ROOT / p.text.removeprefix("./")).exists()})
    assert missing == []


@pytest.mark.parametrize(("command", "wrong"), [
    ("scripts/setup --runtime", False),
    ("scripts/setup --nope", True),
    ("scripts/nothing-here", True),
    ("scripts/console build --force", False),
    ("scripts/console deploy", True),
    ("scripts/test tests/api -x", False),
    ("scripts/serve --port 8001", False),
    ("scripts/serve --colour", True),
    ("authoric serve --port 8001", False),
    ("authoric serve --colour", True),
    ("authoric launch", True),
    (".venv/bin/authoric typegen --app demo --lang ts", False),
    ("AUTHORIC_X=1 .venv/bin/python -m authoric.cli migrate --downgrade base", False),
    (".venv/bin/python -m bench.crud --seconds 5", False),
    (".venv/bin/python -m bench.crud --no-such-flag", True),
    ("python -m bench.nothing", True),
    ("python -m bench.X --any", False),
])
def test_a_command_is_found_wrong_exactly_when_its_script_subcommand_module_or_flag_is_gone(
        command: str, wrong: bool) -> None:
    assert (problem(command) is not None) == wrong, problem(command)


def test_a_command_in_an_indented_code_block_is_read_and_a_list_item_s_prose_is_not() -> None:
    page = ("Run it:\n\n    .venv/bin/python -m bench.crud --seconds 5 \\\n"
            "        --no-such-flag\n\n- an item\n\n    continued prose, not a command\n\n"
            "```sh\nscripts/setup\n```\n")
    found = [words(c) for c in indented_commands(page)]
    assert found == [[".venv/bin/python", "-m", "bench.crud", "--seconds", "5", "--no-such-flag"]]
