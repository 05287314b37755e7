"""The layering holds: imports flow one way, pipelines never import each other, no module too long.

grammars/serve/weights -> llm -> store -> (run context, registry) -> pipelines | manuscript | eval | view -> cli.
The view reads stored runs and asks the registry how a pipeline's state is shown; it imports no pipeline. The test
doubles (agent.testing) sit on llm, and in agent/ only the repro simulation imports them. Checked on the source with
``ast``, including imports inside functions (lazy imports count too).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600

PIPELINE_DEPS = {
    "agent.errors",
    "agent.limits",
    "agent.text",
    "agent.userinput",
    "agent.repetition",
    "agent.quotes",
    "agent.gate",
    "agent.lint",
    "agent.settings",
    "agent.llm",
    "agent.store",
    "agent.run_context",
    "agent.pipelines",
    "grammars",
    "agent.weights",
    "agent.style",
    "agent.language",
    "agent.bible",
}

# what each layer may import from fabula (besides itself); anything else is an upward import
ALLOWED: dict[str, set[str]] = {
    "grammars": set(),
    "serve": set(),
    "agent.weights": set(),
    "agent.plugins": set(),
    "agent.errors": set(),
    "agent.limits": set(),
    "agent.keyvalue": set(),
    "agent.text": set(),
    "agent.userinput": {"agent.errors", "agent.text"},
    "agent.repetition": {"agent.text"},
    "agent.quotes": set(),
    "agent.language": {"agent.text"},
    "agent.style": {"agent.errors", "agent.text", "grammars"},
    "agent.bible": {"agent.errors", "agent.text"},
    "agent.gate": set(),
    "agent.lint": {"agent.errors", "agent.text"},
    "agent.prompt_set": {"agent.errors", "agent.text"},
    "agent.settings": {"agent.errors", "agent.keyvalue", "agent.userinput", "agent.limits", "agent.llm"},
    "agent.llm": {
        "agent.errors",
        "agent.text",
        "agent.repetition",
        "grammars",
        "agent.weights",
        "agent.plugins",
        "agent.keyvalue",
    },
    "agent.testing": {"agent.errors", "agent.text", "agent.repetition", "agent.llm", "grammars", "agent.weights"},
    "agent.store": {
        "agent.language",
        "agent.errors",
        "agent.keyvalue",
        "agent.limits",
        "agent.text",
        "agent.userinput",
        "agent.llm",
        "agent.gate",
    },
    "agent.run_context": {"agent.llm", "agent.store"},
    "agent.pipelines": {
        "agent.errors",
        "agent.llm",
        "agent.store",
        "agent.run_context",
        "agent.settings",
        "agent.plugins",
    },
    "agent.nst": PIPELINE_DEPS,
    "agent.magnet": PIPELINE_DEPS,
    "agent.batch": PIPELINE_DEPS | {"agent.nst", "agent.magnet", "agent.prompt_set"},
    "agent.view": {
        "agent.errors",
        "agent.userinput",
        "agent.store",
        "agent.pipelines",
        "agent.style",
        "agent.language",
    },
    "agent.manuscript": {
        "agent.errors",
        "agent.text",
        "agent.userinput",
        "agent.store",
        "agent.run_context",
        "agent.pipelines",
    },
    "agent.repro": PIPELINE_DEPS | {"agent.batch", "agent.eval", "agent.testing"},
    "agent.eval": {
        "agent.style",
        "agent.language",
        "agent.errors",
        "agent.limits",
        "agent.text",
        "agent.userinput",
        "agent.repetition",
        "agent.quotes",
        "agent.gate",
        "agent.llm",
        "agent.store",
        "grammars",
        "agent.weights",
    },
}

DOUBLES_USERS = {"agent.repro.simulated"}
"""The only modules of agent/ that may import the test doubles (agent.testing): simulation code, a scripted
model standing in for a real one on purpose. The rest of the product never runs on a double."""


def layer_of(module: str) -> str | None:
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def fabula_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # ``from agent import pipelines`` imports the module agent.pipelines, not only the package
            names.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if (ROOT.joinpath(*node.module.split("."), alias.name + ".py")).exists()
                or (ROOT.joinpath(*node.module.split("."), alias.name, "__init__.py")).exists()
            )
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.split(".")[0] in ("agent", "grammars", "serve")}


def modules() -> list[tuple[str, Path]]:
    out = []
    for package in ("agent", "grammars", "serve"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            out.append((name, path))
    return out


def test_imports_flow_one_way():
    upward = []
    for name, path in modules():
        layer = layer_of(name)
        if layer is None:  # agent.cli and agent/__init__ wire everything
            continue
        for imported in fabula_imports(path):
            target = layer_of(imported) or imported
            if target.startswith("agent.cli") or (
                target != layer and target not in ALLOWED[layer] and not (target == "agent" and imported == "agent")
            ):
                upward.append(f"{name} imports {imported}")
    assert not upward, "\n".join(upward)


def test_only_the_simulation_imports_the_test_doubles():
    users = sorted(
        f"{name} imports {imported}"
        for name, path in modules()
        for imported in fabula_imports(path)
        if layer_of(imported) == "agent.testing" and layer_of(name) != "agent.testing" and name not in DOUBLES_USERS
    )
    assert not users, users


def test_pipelines_never_import_each_other():
    crossing = [
        f"{name} imports {imported}"
        for name, path in modules()
        for imported in fabula_imports(path)
        if {layer_of(name), layer_of(imported)} == {"agent.nst", "agent.magnet"}
    ]
    assert not crossing, crossing


def test_no_module_is_too_long():
    long = [
        f"{path.relative_to(ROOT)}: {n}"
        for _, path in modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not long, long


# inside NstAgent, rooms one way: state and config, then chapter/, plan/, revise/ | baselines/, best_of/, then the
# runner and the sequel (which writes a book with the runner)
NST_INNER: dict[str, tuple[str, ...]] = {
    "agent.nst.chapter": (
        "agent.nst.plan",
        "agent.nst.revise",
        "agent.nst.baselines",
        "agent.nst.best_of",
        "agent.nst.runner",
        "agent.nst.sequel",
    ),
    "agent.nst.plan": (
        "agent.nst.revise",
        "agent.nst.baselines",
        "agent.nst.best_of",
        "agent.nst.runner",
        "agent.nst.sequel",
    ),
    "agent.nst.revise": ("agent.nst.baselines", "agent.nst.best_of", "agent.nst.runner", "agent.nst.sequel"),
    "agent.nst.baselines": ("agent.nst.revise", "agent.nst.best_of", "agent.nst.runner", "agent.nst.sequel"),
    "agent.nst.best_of": ("agent.nst.baselines", "agent.nst.runner", "agent.nst.sequel"),
    "agent.nst.state": (
        "agent.nst.chapter",
        "agent.nst.plan",
        "agent.nst.revise",
        "agent.nst.baselines",
        "agent.nst.best_of",
        "agent.nst.runner",
        "agent.nst.sequel",
    ),
    "agent.nst.config": ("agent.nst.",),
    "agent.nst.paper_profile": ("agent.nst.",),
}
NST_CONFIG_PARTS = {"agent.nst.config": ("agent.nst.paper_profile",)}
"""What a room may import despite its ban: the settings' paper bundles, plain data that imports nothing
of agent.nst (its own entry above bans that), split from agent.nst.config to keep each module short."""


def test_nst_rooms_import_downwards():
    upward = [
        f"{name} imports {imported}"
        for name, path in modules()
        for room, banned in NST_INNER.items()
        if name == room or name.startswith(room + ".")
        for imported in fabula_imports(path)
        if any(imported == b or imported.startswith(b if b.endswith(".") else b + ".") for b in banned)
        and imported not in NST_CONFIG_PARTS.get(room, ())
    ]
    assert not upward, "\n".join(upward)
