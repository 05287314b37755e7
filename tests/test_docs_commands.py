"""Every command shown in README.md and docs/*.md works as shown (#26 item 5).

Each ``fabula ...`` line of a shell code block parses under the real parser; the ones that need
no model (``--help``, listings, ``grammars``, ``story``, ``completion``, ``serve --dry-run``)
run and exit 0; every repository path a shell line names exists; a prompt set's ``--id`` or
``--ids`` names prompts that are in it.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL_BLOCKS = {"", "sh", "bash", "shell", "console"}
REPO_DIRS = ("agent/", "docs/", "examples/", "grammars/", "scripts/", "serve/", "tests/")
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}

PENDING: dict[tuple[str, str | None], str] = {}
"""Commands the docs may show before the branch that adds them lands (empty: every command shown
has to parse)."""


@dataclass(frozen=True)
class Shown:
    doc: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def words(self) -> list[str]:
        """The command's words up to the first shell operator (a pipe, a redirect), comments dropped."""
        words = shlex.split(self.text, comments=True)
        for i, word in enumerate(words):
            if word in SHELL_OPERATORS:
                return words[:i]
        return words


def shell_lines(doc: Path) -> list[Shown]:
    """Every logical line (continuations joined) of the shell code blocks of ``doc``."""
    text = doc.read_text(encoding="utf-8")
    out = []
    for block in FENCE.finditer(text):
        if block.group(1).lower() not in SHELL_BLOCKS:
            continue
        first = text[: block.start(2)].count("\n") + 1
        pending = ""
        for offset, raw in enumerate(block.group(2).splitlines()):
            line = raw.strip()
            if line.startswith("$ "):
                line = line[2:]
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line, pending = pending + line, ""
            if line and not line.startswith("#"):
                out.append(Shown(doc, first + offset, line))
    return out


def shown_commands() -> list[Shown]:
    return [s for doc in DOCS for s in shell_lines(doc) if s.text.startswith("fabula ")]


def pending_reason(words: list[str]) -> str | None:
    for (command, flag), reason in PENDING.items():
        if words[1:2] == [command] and (flag is None or flag in words):
            return reason
    return None


def parses(words: list[str]) -> tuple[bool, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(words[1:])
        except SystemExit as exit_:
            return exit_.code == 0, err.getvalue()
    return True, ""


def runnable(words: list[str]) -> bool:
    """Commands that call no model and need no run: they are run, and must exit 0."""
    rest = words[1:]
    return (
        "--help" in rest
        or "-h" in rest
        or rest == ["--version"]  # not `export RUN --version N`
        or rest[:1] in (["models"], ["completion"], ["runs"])
        or rest[:2]
        in (
            ["grammars", "list"],
            ["grammars", "export"],
            ["story", "check"],
            ["story", "schema"],
            ["config", "show"],
            ["config", "path"],
        )
        or rest[:2] == ["repro", "--list"]
        or (rest[:1] == ["serve"] and "--dry-run" in rest)
    )


COMMANDS = shown_commands()


def test_the_docs_show_commands_and_the_readme_fits_two_screens():
    assert len(COMMANDS) > 80
    assert {s.doc.name for s in COMMANDS} >= {"README.md", "nstagent.md", "magnet.md", "runs.md", "servers.md"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 100  # two screens
    for doc in DOCS[1:]:
        assert f"docs/{doc.name}" in readme, f"README's contents do not link {doc.name}"


@pytest.mark.parametrize("shown", COMMANDS, ids=lambda s: s.where)
def test_each_command_parses(shown):
    ok, error = parses(shown.words)
    if not ok and pending_reason(shown.words):
        pytest.skip(f"lands with another branch: {pending_reason(shown.words)}")
    assert ok, f"{shown.where}: {shown.text}\n{error}"


@pytest.mark.parametrize("shown", [s for s in COMMANDS if runnable(s.words)], ids=lambda s: s.where)
def test_commands_that_need_no_model_run(shown, tmp_path, monkeypatch, capsys):
    if not parses(shown.words)[0] and pending_reason(shown.words):
        pytest.skip(f"lands with another branch: {pending_reason(shown.words)}")
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # outputs land here, never in the checkout
    (tmp_path / "runs").mkdir()
    args = [
        str(ROOT / w) if w.startswith(REPO_DIRS) and (ROOT / w).exists() and _is_input(shown.words, w) else w
        for w in shown.words[1:]
    ]
    try:
        code = main(args)
    except SystemExit as exit_:  # --help, --version
        code = exit_.code
    assert code == 0, f"{shown.where}: {shown.text}\n{capsys.readouterr().err}"


def _is_input(words: list[str], word: str) -> bool:
    """Not the value of -o/--out (an output, written under the test's folder)."""
    i = words.index(word)
    return words[i - 1] not in ("-o", "--out", "--output") and words[1:3] != ["grammars", "export"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_files_the_docs_name_exist(doc):
    missing = []
    for shown in shell_lines(doc):
        try:
            words = shlex.split(shown.text, comments=True)
        except ValueError:
            continue
        for word in words:
            value = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
            if value.startswith(REPO_DIRS) and not (ROOT / value).exists() and not _written(words, word):
                missing.append(f"{shown.where}: {value}")
    assert missing == []


def _written(words: list[str], word: str) -> bool:
    i = words.index(word)
    return i > 0 and words[i - 1] in ("-o", "--out", "--output", ">")


@pytest.mark.parametrize("shown", [s for s in COMMANDS if "--prompts" in s.words], ids=lambda s: s.where)
def test_prompt_ids_are_in_the_prompt_set(shown):
    from agent.batch.stories import select_prompts

    words = shown.words
    path = words[words.index("--prompts") + 1]
    if not path.startswith(REPO_DIRS):
        pytest.skip(f"{path} is the user's own file")
    if "--id" in words:
        assert select_prompts(ROOT / path, words[words.index("--id") + 1]), shown.where
    if "--ids" in words:
        assert select_prompts(ROOT / path, words[words.index("--ids") + 1]), shown.where


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", doc.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_links_between_the_docs_resolve(doc):
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text(encoding="utf-8"))):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
            broken.append(target)
    assert broken == []
