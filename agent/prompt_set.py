"""A prompt set (JSONL: one ``{"id": ..., "prompt": ...}`` object a line), read and validated whole.

``fabula write nst --prompts F --id N`` and ``fabula batch --prompts F`` read a set through
:func:`read_prompt_set` alone, so both accept and refuse the same files: every line is parsed
(a broken line anywhere is refused, not only before the wanted id), an id is a string or an
integer (never a boolean, a list or an object), and ids are unique as text (``1`` and ``"1"``
are the same id, so both in one file is refused).
"""

from __future__ import annotations

import json
import os

from agent.errors import InputError
from agent.text import read_capped

MAX_PROMPT_SET_BYTES = 64 << 20
MAX_ID_CHARS = 200


def read_prompt_set(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``(id, prompt)`` of every line of the set, in file order; :class:`InputError` for any bad line."""
    try:
        lines = read_capped(path, MAX_PROMPT_SET_BYTES).decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read --prompts {path}: {exc}") from exc
    items: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not a JSON object ({exc.msg})") from exc
        except RecursionError:
            raise InputError(f"{where}: not a prompt object (nested too deeply)") from None
        if not isinstance(item, dict) or "id" not in item or "prompt" not in item:
            raise InputError(f"{where}: a prompt needs an id and a prompt")
        raw = item["id"]
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise InputError(f"{where}: an id is a string or an integer, not {type(raw).__name__} {_short(raw)}")
        key = str(raw).strip()
        if not key or len(key) > MAX_ID_CHARS or any(not c.isprintable() for c in key):
            raise InputError(f"{where}: id {_short(raw)} must be 1-{MAX_ID_CHARS} printable characters")
        if not isinstance(item["prompt"], str) or not item["prompt"].strip():
            raise InputError(f"{where}: id {key} has no prompt text")
        if key in seen:
            raise InputError(f'{where}: id {key} appears twice (first on line {seen[key]}; 1 and "1" are the same id)')
        seen[key] = number
        items.append((key, item["prompt"].strip()))
    if not items:
        raise InputError(f"{path}: no prompts in the file")
    return items


def prompt_by_id(path: str | os.PathLike[str], prompt_id: str) -> str:
    """The prompt with ``prompt_id`` in a set that is valid whole."""
    wanted = str(prompt_id).strip()
    for key, prompt in read_prompt_set(path):
        if key == wanted:
            return prompt
    raise InputError(f"no prompt with id {prompt_id} in {path}")


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text[:40] + ("..." if len(text) > 40 else "")
