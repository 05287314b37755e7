"""When and why each world variable changed: the commit history of a Magnet run, and the
world graph exported as JSON, Graphviz DOT or a self-contained SVG.

Run ``python -m agent.magnet.history RUN_DIR [--format text|json|dot|svg] [-o FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agent.magnet import graphviz
from agent.magnet.graph_layout import layout_svg
from agent.magnet.world import WorldGraph
from agent.store import RunStore, StoreError
from agent.store.snapshots import StepRecord


def commits(store: RunStore) -> list[dict[str, Any]]:
    """Every committed world write, in order, with the step's goal and the action that caused it."""
    out = []
    for row in store.steps():
        for commit in row["record"].get("commits", []):
            out.append({**commit, "goal": row["goal"]})
    return out


def variable_label(commit: dict[str, Any]) -> str:
    """``subject.attribute`` of a commit (a run written before subjects: its flat key)."""
    if "subject" in commit and "attribute" in commit:
        return f"{commit['subject']}.{commit['attribute']}"
    return str(commit.get("key", "?"))


def goal_events(store: RunStore) -> list[dict[str, Any]]:
    return [{"step": r["step"], **r["record"]["goal_event"]} for r in store.steps() if r["record"].get("goal_event")]


def render_text(store: RunStore) -> list[str]:
    """Per timestep: each write as ``subject.attribute: old -> new [by whom: action]``, updates
    the narrator rejected, calls that failed (and what the step did instead), the goal event."""
    lines: list[str] = []
    events = {e["step"]: e for e in goal_events(store)}
    by_step: dict[int, list[dict[str, Any]]] = {}
    for c in commits(store):
        by_step.setdefault(c["step"], []).append(c)
    for row in store.steps():
        step = row["step"]
        record = StepRecord.read(row["record"])
        failures, rejected = record.failures, record.rejected_updates
        if step not in by_step and step not in events and not failures and not rejected:
            continue
        lines.append(
            f"step {step}  selected {', '.join(record.selected) or '-'}"
            + (f"  (not selected: {', '.join(record.unselected)})" if record.unselected else "")
        )
        for c in by_step.get(step, []):
            old = "(new)" if c["old"] is None else json.dumps(c["old"], ensure_ascii=False)
            secret = " (secret)" if c.get("secret") else ""
            lines.append(
                f"  {variable_label(c)}: {old} -> {json.dumps(c['new'], ensure_ascii=False)}{secret}   "
                f"[{c['character']}: {_short(c['action'])}]"
            )
        for r in rejected:
            lines.append(
                f"  rejected by the narrator: {variable_label(r)} = "
                f"{json.dumps(r.get('value'), ensure_ascii=False)} [{r.get('character')}]"
            )
        for f in failures:
            who = f" {f['character']}" if f.get("character") else ""
            lines.append(f"  failed: {f.get('role')}{who}: {_short(f.get('error', ''), 90)} -> {f.get('outcome')}")
        if step in events:
            e = events[step]
            lines.append(f"  goal {e['kind']}: {_short(e['goal'], 110)}")
    return lines or ["no world-state commits yet"]


def graph_json(store: RunStore, unit: int | None = None) -> dict[str, Any]:
    state = store.state(unit)
    if not state or state.get("world") is None:
        raise StoreError(f"{store.run_dir} has no world graph (not a Magnet run, or run --no-structured-state)")
    world = WorldGraph.from_json(state["world"])
    return {
        "format": "fabula-magnet-graph",
        "format_version": 2,
        "step": store.info().last_unit,
        **world.nodes_and_edges(),
        "history": commits(store),
        "goals": state.get("goals", []),
    }


def graph_dot(graph: dict[str, Any]) -> str:
    shapes = {"world": "doublecircle", "character": "box", "variable": "note"}
    lines = ["digraph world {", "  rankdir=LR;", '  node [fontname="Helvetica"];']
    for node in graph["nodes"]:
        label = node["label"] + (
            f"\\n= {_short(json.dumps(node['value'], ensure_ascii=False), 40)}" if node["kind"] == "variable" else ""
        )
        lines.append(f'  "{_dot(node["id"])}" [shape={shapes[node["kind"]]}, label="{_dot(label)}"];')
    for edge in graph["edges"]:
        label = (
            f' [label="{_dot(edge.get("label", ""))}"]'
            if edge.get("label")
            else (" [style=dashed]" if edge["kind"] == "concerns" else "")
        )
        lines.append(f'  "{_dot(edge["from"])}" -> "{_dot(edge["to"])}"{label};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def graph_svg(graph: dict[str, Any]) -> str:
    """The world graph as SVG, every label readable: a card for the world and each character with its
    variables, and each relation pair once; laid out by Graphviz when it is installed
    (:mod:`agent.magnet.graphviz`), else by fabula's own grid (:mod:`agent.magnet.graph_layout`)."""
    drawn = graphviz.render(graph) if graphviz.chosen() == "graphviz" else None
    return drawn if drawn is not None else layout_svg(graph)


def _short(text: str, n: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _dot(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


GRAPH_FORMATS = ("json", "dot", "svg")


def render_graph(store: RunStore, fmt: str) -> str:
    """The run's current world graph as JSON, Graphviz DOT or SVG (``fabula export --graph``)."""
    graph = graph_json(store)
    if fmt == "json":
        return json.dumps(graph, ensure_ascii=False, indent=2) + "\n"
    return graph_dot(graph) if fmt == "dot" else graph_svg(graph)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agent.magnet.history", description="A Magnet run's world-state commit history and graph."
    )
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--format", choices=["text", *GRAPH_FORMATS], default="text")
    parser.add_argument("-o", "--output", metavar="FILE")
    args = parser.parse_args(argv)
    try:
        with RunStore.open(args.run_dir, readonly=True) as store:
            body = "\n".join(render_text(store)) + "\n" if args.format == "text" else render_graph(store, args.format)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(body)
    else:
        sys.stdout.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
