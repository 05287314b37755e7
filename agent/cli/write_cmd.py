"""``fabula write PIPELINE ...``: start a new run of a story pipeline.

Each pipeline's options live in its own module (``agent/cli/write_<pipeline>.py`` with an
``add_parser(subparsers)`` function); the modules listed here that exist are wired in.
"""

from __future__ import annotations

import importlib

WRITER_MODULES = ["agent.cli.write_nst", "agent.cli.write_magnet"]


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "write",
        help="write a story with a pipeline (nst, magnet, ...)",
        description="Start a new run. 'fabula resume RUN_DIR' continues one.",
    )
    inner = parser.add_subparsers(dest="pipeline", required=True, metavar="PIPELINE")
    for name in WRITER_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.add_parser(inner)
