"""Where every benchmark script writes its figures: ``bench-results/<name>.json`` (ignored by git)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "bench-results"


def write_results(name: str, data: Any, path: str | Path | None = None) -> Path:
    """Write ``data`` as JSON to ``path`` (default ``bench-results/<name>.json``); returns the path."""
    target = Path(path) if path else RESULTS / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    print(f"wrote {target}")
    return target
