"""Print every ``fabula`` command's ``--help``, one after another, to show a refactor changes no help text.

    PYTHONPATH=$PWD python scripts/dump_help.py OUT.txt

Walks the command tree the way ``scripts/base_install_check.py`` does, at a fixed 100-column width,
so the output of two revisions can be compared with ``diff``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> int:
    os.environ["COLUMNS"] = "100"
    from base_install_check import commands, run

    from agent.cli import build_parser
    from agent.cli import main as fabula

    out = []
    for path in commands(build_parser()):
        code, text = run(fabula, [*path, "--help"])
        out.append(f"=== fabula {' '.join(path)} --help (exit {code})\n{text}")
    Path(sys.argv[1]).write_text("".join(out), encoding="utf-8")
    print(f"{len(out)} commands written to {sys.argv[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
