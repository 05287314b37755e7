"""What a base install of fabula (no extra) must do: every command's ``--help``, and
``fabula eval compare`` / ``eval report`` on stored judgments.

Run it in a fresh venv that holds only the base dependencies (``scripts/check-base-install``
makes one), or in any environment with ``--block-extras``: then every module that neither
the standard library nor the base dependencies (and what they require) provide is made
unimportable first, so an import that only an extra satisfies fails here exactly as it would
in a base install. Exits non-zero, naming the command, on the first failure.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.metadata as md
import io
import re
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWN = {"agent", "grammars", "serve", "scripts", "tests"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def base_closure() -> set[str]:
    """The base dependencies of pyproject.toml and everything they require (extras excluded)."""
    todo = [_name(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r.replace("'", '"').replace("extra==", "extra ==")]
    return seen


def allowed_modules() -> set[str]:
    closure = base_closure()
    modules = set(sys.stdlib_module_names) | OWN | {"_distutils_hack", "sitecustomize", "usercustomize"}
    for module, dists in md.packages_distributions().items():
        if any(d.lower().replace("_", "-") in closure for d in dists):
            modules.add(module)
    return modules


class BlockExtras(importlib.abc.MetaPathFinder):
    """Refuses every top-level module a base install would not have."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.refused: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top in self.allowed or top.startswith("_"):  # C accelerators of allowed packages
            return None
        self.refused.add(top)
        raise ModuleNotFoundError(f"No module named {top!r} (not in a base install)", name=top)


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the parser (``()``, ``("eval",)``, ``("eval", "compare")``, ...)."""
    out = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += commands(sub, (*prefix, name))
    return out


def run(main, argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return int(code or 0), out.getvalue() + err.getvalue()


def judged_runs(root: Path) -> tuple[list[str], list[str]]:
    """Two methods on three prompts, judged by a scripted judge through the real judge code."""
    from agent.eval.consistency import judge_consistency
    from agent.eval.judge import Judge
    from agent.eval.story import load_story
    from agent.llm.types import Usage
    from agent.store import RunStore
    from agent.testing.scripted import ScriptedLLM

    def scripted(errors: int) -> ScriptedLLM:
        """A judge that finds ``errors`` factual contradictions and nothing else."""
        found = [
            {
                "subtype": "quantitative_mismatches",
                "exact_quote": "word",
                "quote_chapter": 1,
                "contradicting_quote": "word",
                "contradicting_chapter": 1,
                "explanation": "e",
            }
        ] * errors

        def reply(request):
            name = request.constraint.name if request.constraint else ""
            return {"contradictions": found if name == "FactualDetailReport" else []}

        return ScriptedLLM(reply, model="scripted-judge", usage=Usage(10, 0, 5))

    sides: tuple[list[str], list[str]] = ([], [])
    for side, method in enumerate(("nst", "rollsum")):
        for prompt in range(3):
            run_dir = root / f"{method}{prompt}"
            store = RunStore.create(
                run_dir,
                pipeline=method,
                model="writer",
                config={"prompt": "p", "prompt_id": str(prompt), "words": 1000},
            )
            store.commit_chapter(1, "One", " ".join(["word"] * 1000) + ".", state={"n": 1})
            store.finish()
            judge_consistency(
                store, load_story(store), Judge(scripted(1 + side + prompt % 2), "scripted"), window_chapters=1
            )
            store.close()
            sides[side].append(str(run_dir))
    return sides


def check() -> list[str]:
    from agent.cli import build_parser, main

    failures = []
    for path in commands(build_parser()):
        code, output = run(main, [*path, "--help"])
        if code != 0 or "usage:" not in output:
            failures.append(f"fabula {' '.join(path)} --help exited {code}: {output.strip()[-300:]}")
    with tempfile.TemporaryDirectory() as tmp:
        a, b = judged_runs(Path(tmp))
        code, output = run(main, ["eval", "compare", *a, "--vs", *b, "--resamples", "500"])
        if code != 0 or "instance_ced" not in output:
            failures.append(f"fabula eval compare exited {code}: {output.strip()[-500:]}")
        code, output = run(main, ["eval", "report", *a, *b, "--out", f"{tmp}/report"])
        report = Path(tmp, "report", "report.md")
        if code != 0 or not report.exists() or "instance CED" not in report.read_text():
            failures.append(f"fabula eval report exited {code}: {output.strip()[-500:]}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--block-extras",
        action="store_true",
        help="make every module outside the standard library and the base dependencies unimportable",
    )
    args = parser.parse_args()
    blocker = None
    if args.block_extras:
        blocker = BlockExtras(allowed_modules())
        sys.meta_path.insert(0, blocker)
    sys.path.insert(0, str(ROOT))
    failures = check()
    for line in failures:
        print(f"FAIL {line}", file=sys.stderr)
    if blocker and blocker.refused:
        print(f"(modules refused as outside a base install: {', '.join(sorted(blocker.refused))})")
    print(f"base install check: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
