"""No two modules of agent/, serve/ or grammars/ import each other, at module level or inside a
function (a lazy import is still a knot: neither module can be read, tested or moved alone).

Checked on the source with ``ast``, like ``tests/test_layering.py``: ``from package import
name`` counts as importing the submodule ``package.name`` when there is one, else the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "grammars", "serve")


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            out[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The fabula modules ``name`` imports (anywhere in it), resolved to modules that exist."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_no_two_modules_import_each_other():
    edges = graph()
    pairs = sorted({tuple(sorted((a, b))) for a, targets in edges.items() for b in targets if a in edges.get(b, ())})
    assert not pairs, "modules that import each other:\n" + "\n".join(f"{a} <-> {b}" for a, b in pairs)
