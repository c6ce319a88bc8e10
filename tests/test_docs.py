"""The user docs (README.md, docs/*.md) say only what the command does.

Every `epub2audio ...` command they show names a subcommand that exists, and every `--option` in
it is in that subcommand's `--help`; an option written on its own (`--notes inline`) is in some
subcommand's `--help`. Every relative link resolves to a file in the repository, and an anchor to
a heading of that page. Every docs page is linked from the README, so a newcomer finds it.

`--help` is asked of the real command, once per subcommand for the whole session. Pure reading,
no audio: cheap.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The index of the measurements the docs cite: its links are checked too.
LINKED = [*PAGES, ROOT / "bench" / "results" / "README.md"]

# The subcommands `epub2audio` dispatches on (cli.main), and the actions under the two that have them.
SUBCOMMANDS = ("verify", "regen", "watch", "library", "voice", "model")
WITH_ACTIONS = ("voice", "model")

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
# `epub2audio` as the command a line starts with (after any VAR=value, as .venv/bin/epub2audio too):
# not a word in a message ("epub2audio cannot read it"), a path (~/.config/epub2audio/), a file name
# (BOOK.epub2audio.toml) or a package extra ('epub2audio[ray]').
COMMAND = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?epub2audio(?=\s|$)")
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _help(args: tuple[str, ...]) -> str:
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run([sys.executable, "-m", "epub2audio.cli", *args, "--help"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"epub2audio {' '.join(args)} --help failed: {proc.stderr.strip()}"
    return proc.stdout


def defined_options(help_text: str) -> set[str]:
    """The long options a --help defines: argparse indents each option's invocation by two spaces
    (`  -o OUTPUT, --output OUTPUT`); its help text, which may name other options, sits deeper."""
    found = set()
    for line in help_text.splitlines():
        if re.match(r"^  -", line):
            found |= set(LONG_OPTION.findall(re.split(r"\s{2,}", line.strip())[0]))
    return found


def actions(help_text: str) -> set[str]:
    """The actions of a subcommand with subparsers: argparse lists them as {add,list,try}."""
    match = re.search(r"\{([a-z,]+)\}", help_text)
    return set(match.group(1).split(",")) if match else set()


@pytest.fixture(scope="session")
def cli_help() -> dict[tuple[str, ...], set[str] | str]:
    """(subcommand words) → the options its --help defines; ("voice",) etc. → its help text."""
    found: dict = {(): defined_options(_help(()))}
    for sub in SUBCOMMANDS:
        text = _help((sub,))
        if sub in WITH_ACTIONS:
            found[(sub, "actions")] = actions(text)
            for action in actions(text):
                found[(sub, action)] = defined_options(_help((sub, action))) | defined_options(text)
        else:
            found[(sub,)] = defined_options(text)
    return found


def code_units(markdown: str) -> list[str]:
    """What the page shows as code: each line of a fenced block (comments cut off), each inline span."""
    units = []
    for block in FENCE.findall(markdown):
        for line in block.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                units.append(line)
    for span in INLINE.findall(FENCE.sub("", markdown)):
        units.append(span.strip())
    return units


def command_problems(markdown: str, cli_help: dict) -> list[str]:
    """Commands and options the page shows that the command does not have."""
    every_option = set().union(*(v for k, v in cli_help.items() if k[-1:] != ("actions",)))
    problems = []
    for unit in code_units(markdown):
        match = COMMAND.search(unit)
        words = unit.split()
        alone = False
        if match:
            words = unit[match.end():].split()
        elif words[0] in SUBCOMMANDS:  # `voice add --max-seconds S`: a subcommand written alone
            alone = True
        elif words[0].startswith("--"):  # an option on its own: some subcommand must have it
            problems += [f"{unit!r}: no subcommand has {opt}" for opt in LONG_OPTION.findall(unit)
                         if opt not in every_option]
            continue
        else:  # another program's command line (ray, pip, calibre-customize, python bench/...)
            continue
        key: tuple[str, ...] = ()
        if words and words[0] in SUBCOMMANDS:
            key = (words[0],)
            if words[0] in WITH_ACTIONS:
                if len(words) < 2 or words[1].startswith("-"):
                    key = None  # `epub2audio voice` alone, as a name: no options to check
                elif words[1] not in cli_help[(words[0], "actions")]:
                    if alone:  # a message that starts with the word: "voice kokoro:NAME needs ..."
                        continue
                    problems.append(f"{unit!r}: `epub2audio {words[0]}` has no action {words[1]!r}")
                    continue
                else:
                    key = (words[0], words[1])
        elif words and re.fullmatch(r"[a-z]+", words[0]):
            problems.append(f"{unit!r}: epub2audio has no subcommand {words[0]!r}")
            continue
        if key is None:
            continue
        for option in LONG_OPTION.findall(" ".join(words)):
            if option not in cli_help[key]:
                problems.append(f"{unit!r}: `{' '.join(('epub2audio', *key, '--help'))}` has no {option}")
    return problems


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", "", heading).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def link_problems(page: Path, markdown: str) -> list[str]:
    problems = []
    for target in LINK.findall(FENCE.sub("", markdown)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve()
        if not path:  # an anchor on this page
            text = markdown
        elif ROOT not in (resolved, *resolved.parents):
            problems.append(f"{target}: outside the repository")
            continue
        elif not resolved.exists():
            problems.append(f"{target}: no such file")
            continue
        else:
            text = resolved.read_text("utf-8") if resolved.is_file() else ""
        if anchor:
            headings = {github_anchor(h) for h in HEADING.findall(FENCE.sub("", text))}
            if anchor not in headings:
                problems.append(f"{target}: {(resolved if path else page).name} has no heading #{anchor}")
    return problems


@pytest.mark.xdist_group("docs")
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_and_options_exist(page, cli_help):
    problems = command_problems(page.read_text("utf-8"), cli_help)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    problems = link_problems(page, page.read_text("utf-8"))
    assert not problems, "\n".join(problems)


def test_every_docs_page_is_linked_from_the_readme():
    readme = ROOT / "README.md"
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(readme.read_text("utf-8"))}
    assert [p.name for p in PAGES[1:] if p.resolve() not in linked] == []


def test_no_issue_numbers_in_user_docs():
    """Development history belongs in the log, not in what a user reads."""
    found = [f"{p.name}: {m.group(0)}" for p in PAGES
             for m in re.finditer(r"\bissues?\s*#?\d+", p.read_text("utf-8"), re.I)]
    assert found == []


@pytest.mark.xdist_group("docs")
def test_the_checks_catch_what_does_not_exist(cli_help):
    """The checks above can fail: a made-up option, subcommand, action and link are each reported."""
    page = ROOT / "docs" / "page.md"  # read from the string below, never written
    text = ("```sh\nepub2audio book.epub --no-such-option\nepub2audio voice remove anna\n"
            "epub2audio convert book.epub\n```\n"
            "Use `--imaginary-flag` or `epub2audio watch IN --out OUT --made-up 8080`.\n"
            "[gone](gone.md), [here](#no-such-heading), [real](#a-real-heading), [up](../../x.md),\n"
            "[readme](../README.md#no-heading), [ok](../README.md#quick-start)\n\n# A real heading\n")
    assert command_problems(text, cli_help) == [
        "'epub2audio book.epub --no-such-option': `epub2audio --help` has no --no-such-option",
        "'epub2audio voice remove anna': `epub2audio voice` has no action 'remove'",
        "'epub2audio convert book.epub': epub2audio has no subcommand 'convert'",
        "'--imaginary-flag': no subcommand has --imaginary-flag",
        "'epub2audio watch IN --out OUT --made-up 8080': `epub2audio watch --help` has no --made-up",
    ]
    assert link_problems(page, text) == ["gone.md: no such file", "#no-such-heading: page.md has no heading #no-such-heading",
                                         "../../x.md: outside the repository",
                                         "../README.md#no-heading: README.md has no heading #no-heading"]
