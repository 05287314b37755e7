"""A GGUF file's metadata, read from its header alone (no tensors, no llama.cpp).

``fabula models`` lists the GGUF files it finds and the embedded backend refuses a file that is
not one before llama.cpp is asked to load it, both in well under a second: the header is read
key by key, arrays (the vocabulary) skipped rather than kept.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

MAGIC = b"GGUF"
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_KEYS = 100_000
MAX_STRING = 64 * 2**20


class NotGGUFError(ValueError):
    """The file is not a readable GGUF (the message says why, in one line)."""


@dataclass(frozen=True)
class GGUFInfo:
    """What a GGUF says about itself: enough to list it and to know it can chat."""

    path: Path
    architecture: str | None
    name: str | None
    context_length: int | None
    size_label: str | None
    has_chat_template: bool
    bytes: int


def _read(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise NotGGUFError("the file ends inside its header (truncated)")
    return data


def _string(stream: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", _read(stream, 8))
    if length > MAX_STRING:
        raise NotGGUFError("a header string is implausibly long (damaged file)")
    return _read(stream, length).decode("utf-8", errors="replace")


def _value(stream: BinaryIO, kind: int) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read(stream, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(stream)
    if kind == _ARRAY:
        item_kind, count = struct.unpack("<IQ", _read(stream, 12))
        if item_kind in _SCALARS:
            stream.seek(struct.calcsize(_SCALARS[item_kind]) * count, 1)
        else:
            for _ in range(count):
                _value(stream, item_kind)
        return None
    raise NotGGUFError(f"unknown metadata type {kind} (damaged file or a newer GGUF version)")


def read_metadata(path: Path) -> dict[str, Any]:
    """The header's key/value metadata (arrays left out)."""
    try:
        with path.open("rb") as stream:
            if _read(stream, 4) != MAGIC:
                raise NotGGUFError(f"{path.name} is not a GGUF file (no GGUF magic number)")
            version, _tensors, keys = struct.unpack("<IQQ", _read(stream, 20))
            if version < 2 or keys > MAX_KEYS:
                raise NotGGUFError(f"{path.name}: unsupported GGUF version {version}")
            out: dict[str, Any] = {}
            for _ in range(keys):
                key = _string(stream)
                (kind,) = struct.unpack("<I", _read(stream, 4))
                out[key] = _value(stream, kind)
            return out
    except OSError as exc:
        raise NotGGUFError(f"cannot read {path}: {exc.strerror or exc}") from None


def gguf_info(path: Path) -> GGUFInfo:
    meta = read_metadata(path)
    arch = meta.get("general.architecture")
    context = meta.get(f"{arch}.context_length") if arch else None
    return GGUFInfo(
        path,
        arch,
        meta.get("general.name"),
        int(context) if isinstance(context, int) else None,
        meta.get("general.size_label"),
        bool(meta.get("tokenizer.chat_template")),
        path.stat().st_size,
    )


def find_gguf_files(folders: list[Path], *, depth: int = 2) -> list[Path]:
    """``*.gguf`` files in ``folders`` and up to ``depth`` levels below, sorted, each once."""
    found: set[Path] = set()
    for folder in folders:
        if folder.is_dir():
            for level in range(depth + 1):
                found.update(p.resolve() for p in folder.glob("/".join(["*"] * level + ["*.gguf"])) if p.is_file())
    return sorted(found)
