"""Where fabula keeps what it downloads and caches: models, plans, logs, the config file.

A small module of its own so that ``agent/`` (the plan cache, the judges' criteria, the CLI's
logs and config) and ``serve/`` (the models) share one rule without the pipelines importing
the model-hosting module; it imports nothing of fabula.
"""

from __future__ import annotations

import os
from pathlib import Path


def fabula_home() -> Path:
    """``$FABULA_HOME`` or ``~/.cache/fabula``: where models and caches live."""
    return Path(os.environ.get("FABULA_HOME") or Path.home() / ".cache" / "fabula").expanduser()
