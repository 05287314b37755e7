"""Print figures of the code's shape: modules, the largest module, class and function, the widest signature,
``Any`` and ``dict[str, Any]`` in annotations, and lines over 100 columns.

    python scripts/house_figures.py [ROOT]

Reads the source with ``ast`` (nothing is imported), over ``agent/``, ``serve/`` and ``grammars/``; run it on two
checkouts to compare a refactor's before and after.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

PACKAGES = ("agent", "serve", "grammars")


def _span(node: ast.AST) -> int:
    return (getattr(node, "end_lineno", 0) or 0) - getattr(node, "lineno", 0) + 1


def _arguments(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return len([n for n in names if n.arg not in ("self", "cls")])


def figures(root: Path) -> dict[str, object]:
    files = sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))
    functions: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    widest: list[tuple[int, str]] = []
    modules: list[tuple[int, str]] = []
    any_count = dict_any = long_lines = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(root))
        modules.append((len(text.splitlines()), rel))
        long_lines += sum(1 for line in text.splitlines() if len(line) > 100)
        dict_any += text.count("dict[str, Any]")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((_span(node), f"{rel}:{node.name}"))
                widest.append((_arguments(node), f"{rel}:{node.name}"))
            elif isinstance(node, ast.ClassDef):
                classes.append((_span(node), f"{rel}:{node.name}"))
            elif isinstance(node, ast.Name) and node.id == "Any":
                any_count += 1
    return {
        "modules": len(files),
        "lines": sum(n for n, _ in modules),
        "largest module": max(modules),
        "largest class": max(classes),
        "largest function": max(functions),
        "median function lines": statistics.median(n for n, _ in functions),
        "functions over 60 lines": sum(1 for n, _ in functions if n > 60),
        "widest signature": max(widest),
        "functions with 10+ parameters": sum(1 for n, _ in widest if n >= 10),
        "Any (names)": any_count,
        "dict[str, Any] (text)": dict_any,
        "lines over 100 columns": long_lines,
    }


def main() -> int:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    for key, value in figures(root).items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
