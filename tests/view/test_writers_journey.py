"""The README's writer's path, walked as written (#36): the block under "A writer's path" is read from
README.md and each line run as a writer runs it (``python -m agent.cli``, in a fresh shell with a home
of its own), so the README and fabula cannot drift apart. The model is the scripted author behind a
vLLM-shaped server (``FABULA_ENDPOINT``, as ``fabula config set endpoint`` would give it); ``$EDITOR`` is
a script that renames chapter 1 in the outline and adds a sentence to an edited chapter. Then the
exports are opened with their own tools (python-docx; the EPUB's form passes epubcheck in
tests/cli/test_desk_exports.py) and the view is looked at in chromium
at 1280 and 390 px (the screenshots are kept in the session's screenshot folder)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from agent.testing.author_server import AuthorServer
from agent.testing.ports import free_port
from tests.test_journey import clean_env
from tests.view.browser_checks import sideways

ROOT = Path(__file__).resolve().parents[2]
MARK = "walks this block as written"
RENAMED = "The Night Cartographer"
ADDED = "The map burned at dawn, and the city woke unchanged."
EDITOR = f"""import re, sys
path = sys.argv[-1]
text = open(path, encoding="utf-8").read()
if re.search(r"^Chapter 1: ", text, flags=re.M):  # the outline: rename chapter 1
    text = re.sub(r"^Chapter 1: .*$", "Chapter 1: {RENAMED}", text, count=1, flags=re.M)
else:  # a chapter's text: one more sentence
    text = text.rstrip() + "\\n\\n{ADDED}\\n"
open(path, "w", encoding="utf-8").write(text)
"""


def writers_path() -> list[list[str]]:
    """The commands of the README's writer's path, as shell words."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!--[^>]*" + MARK + r"[^>]*-->\s*```sh\n(.*?)```", readme, flags=re.S)
    assert block, "README.md has no writer's path block"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip().startswith("fabula ")]


def test_the_readme_writers_path_holds_the_road_a_writer_walks():
    commands = [words[1] for words in writers_path()]
    assert commands == ["write", "outline", "resume", "view", "edit", "reconcile", "export", "export"]
    assert "--prompt" in writers_path()[0]


def test_walking_the_readmes_writers_path(tmp_path, browser, shots):
    docx = pytest.importorskip("docx")
    env = clean_env(tmp_path / "home")
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR, encoding="utf-8")
    env["EDITOR"] = env["VISUAL"] = f"{sys.executable} {editor}"
    with AuthorServer(vllm=True) as server:
        env["FABULA_ENDPOINT"] = server.url
        for words in writers_path():
            argv = [sys.executable, "-m", "agent.cli", *words[1:]]
            if words[1] == "view":
                look_at_the_view(argv, env, tmp_path, browser, shots)
                continue
            started = time.monotonic()
            done = subprocess.run(
                argv, cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, text=True, capture_output=True, timeout=600
            )
            print(f"{time.monotonic() - started:6.1f} s  {shlex.join(words)}")
            assert done.returncode == 0, f"{shlex.join(words)}\n{done.stderr}"
            if words[1] == "edit":
                assert "next: fabula reconcile runs/night-map" in done.stderr
    book = docx.Document(str(tmp_path / "night-map.docx"))
    texts = [p.text for p in book.paragraphs]
    assert texts[0].startswith("A. Writer\tabout ") and "by A. Writer" in texts
    assert f"Chapter 1: {RENAMED}" in [p.text for p in book.paragraphs if p.style.name == "Heading 1"]
    assert any(ADDED in t for t in texts)  # the edit reached the manuscript
    with zipfile.ZipFile(tmp_path / "night-map.epub") as epub:
        nav = epub.read(next(n for n in epub.namelist() if n.endswith("nav.xhtml"))).decode()
        title = epub.read(next(n for n in epub.namelist() if n.endswith("title.xhtml"))).decode()
    assert f"Chapter 1: {RENAMED}" in nav and "A. Writer" in title  # the author recorded by the first export
    # epubcheck passes this export's form in tests/cli/test_desk_exports.py (a minute of java, once is enough)


def look_at_the_view(argv: list[str], env: dict[str, str], cwd: Path, browser, shots: Path) -> None:
    """``fabula view runs/`` as the README shows it (on a free port), looked at at 1280 and 390 px."""
    port = free_port()
    proc = subprocess.Popen(
        [*argv, "--port", str(port)],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/", timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        for width, height in ((1280, 900), (390, 844)):
            page = browser.new_context(viewport={"width": width, "height": height}).new_page()
            page.goto(url + "/run/night-map/story")
            assert f"Chapter 1: {RENAMED}" in page.locator("#unit-1 h2").inner_text()
            assert sideways(page) <= 1
            page.screenshot(path=str(shots / f"journey-book-{width}.png"))
            page.goto(url + "/run/night-map/outline")
            assert RENAMED in page.locator("#outline-table").inner_text()
            page.screenshot(path=str(shots / f"journey-outline-{width}.png"))
            page.context.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
