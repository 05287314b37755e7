"""EPUB and DOCX files are ZIP archives: their declared sizes are checked before any member is
inflated, so a small file that inflates to gigabytes (a zip bomb) is refused in one line.

Python's ``zipfile`` never inflates a member past the size its header declares (a member that
lies fails its CRC check), so checking the declared sizes bounds what ebooklib and python-docx read.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from agent.errors import InputError

MAX_MEMBER_BYTES = 64 << 20
"""The largest member, inflated (a chapter is some KiB; an illustration some MiB)."""
MAX_TOTAL_BYTES = 512 << 20
"""Every member together, inflated."""
MAX_MEMBERS = 20_000
"""Members of one archive (a 5,000-chapter EPUB has about 5,000)."""


def members(path: Path, kind: str) -> set[str]:
    """The member names of the ``kind`` (EPUB, DOCX) archive at ``path``, after its inflated sizes were checked."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise InputError(f"{path} is not a readable {kind} ({type(exc).__name__}: not a ZIP archive)") from None
    if len(infos) > MAX_MEMBERS:
        raise InputError(f"{path} holds {len(infos):,} files; fabula reads archives of up to {MAX_MEMBERS:,}")
    total = 0
    for info in infos:
        if info.file_size > MAX_MEMBER_BYTES:
            raise InputError(
                f"{path}: {info.filename[:60]} inflates to {info.file_size / 2**20:,.0f} MiB; fabula "
                f"reads members of up to {MAX_MEMBER_BYTES >> 20} MiB (is it a zip bomb?)"
            )
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise InputError(
                f"{path} inflates to over {MAX_TOTAL_BYTES >> 20} MiB; fabula reads archives of up to "
                "that (is it a zip bomb?)"
            )
    return {info.filename for info in infos}
