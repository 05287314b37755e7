"""Writing an imported manuscript as a run: each chapter committed as a written chapter is, and
every part of the file left out kept in the plan (``left_out``: what, words, text), so nothing
imported is lost.

``RunStore.commit_chapter`` stores the text, its first version and its search windows in one
transaction, so search, show, view, export and the metrics read an imported run at once. The
run is made in a folder that is new or empty; if anything fails, the folder is removed again
(or emptied, if it existed), so a failed import leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from agent.errors import InputError
from agent.manuscript.kind import NAME, VERSION
from agent.manuscript.model import Manuscript
from agent.store import RunStore
from agent.store.paths import check_output_dir
from agent.userinput import MAX_TITLE, clean_label


def check_out(out: str) -> tuple[Path, bool]:
    """``(folder, existed)``: a new folder, or an existing empty one (anything else is refused)."""
    folder = check_output_dir(out, what="--out folder")
    if folder.exists():
        if not folder.is_dir():
            raise InputError(f"--out {out} exists and is not a folder")
        if any(folder.iterdir()):
            raise InputError(f"--out {out} already exists and is not empty; give a new folder")
        return folder, True
    return folder, False


def source_config(path: Path, manuscript: Manuscript, split: str | None) -> dict[str, Any]:
    """What the run records of its source: enough to tell whether a file is the one imported."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {
        "source": path.name,
        "format": manuscript.format,
        "encoding": manuscript.encoding,
        "bytes": path.stat().st_size,
        "sha256": digest.hexdigest(),
        "split": split,
        "chapters": len(manuscript.pieces),
        "words": manuscript.words,
        "pipeline_version": VERSION,
    }


def write_run(
    manuscript: Manuscript, out: str, config: dict[str, Any], *, title: str | None = None, author: str | None = None
) -> Path:
    """Create the run in ``out`` and commit every chapter; returns the run folder."""
    folder, existed = check_out(out)
    try:
        store = RunStore.create(
            folder, pipeline=NAME, config=config, unit_kind="chapter", target_units=len(manuscript.pieces)
        )
        with store, store.sessions.hold("import"):
            for key, value in (
                ("title", _label(title or manuscript.title)),
                ("author", _label(author or manuscript.author)),
                ("import_notes", manuscript.notes),
                ("left_out", [{"what": p.title, "words": p.words, "text": p.text} for p in manuscript.left_out]),
            ):
                if value:
                    store.plans.put(key, value)
            for index, piece in enumerate(manuscript.pieces, start=1):
                heading = _label(piece.title) or ""
                store.commit_chapter(
                    index,
                    heading,
                    piece.text,
                    state={"chapter": {"words": piece.words, "heading": heading, "number": piece.number}},
                )
            store.finish()
    except BaseException:
        _undo(folder, existed)
        raise
    return folder


def _label(text: str | None) -> str | None:
    """A title or name read from the file, fit for a terminal (``agent.userinput``'s rule), cut to length."""
    return clean_label(text)[:MAX_TITLE] if text else text


def _undo(folder: Path, existed: bool) -> None:
    if not existed:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
