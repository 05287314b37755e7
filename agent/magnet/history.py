"""When and why each world variable changed: the commit history of a Magnet run, and the
world graph exported as JSON, Graphviz DOT or a self-contained SVG.

Run ``python -m agent.magnet.history RUN_DIR [--format text|json|dot|svg] [-o FILE]``.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from typing import Any

from agent.magnet.world import WORLD, WorldGraph
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
        lines.append(f"step {step}  selected {', '.join(record.selected) or '-'}"
                     + (f"  (not selected: {', '.join(record.unselected)})" if record.unselected else ""))
        for c in by_step.get(step, []):
            old = "(new)" if c["old"] is None else json.dumps(c["old"], ensure_ascii=False)
            secret = " (secret)" if c.get("secret") else ""
            lines.append(f"  {variable_label(c)}: {old} -> {json.dumps(c['new'], ensure_ascii=False)}{secret}   "
                         f"[{c['character']}: {_short(c['action'])}]")
        for r in rejected:
            lines.append(f"  rejected by the narrator: {variable_label(r)} = "
                         f"{json.dumps(r.get('value'), ensure_ascii=False)} [{r.get('character')}]")
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
    return {"format": "fabula-magnet-graph", "format_version": 2, "step": store.info().last_unit,
            **world.nodes_and_edges(), "history": commits(store), "goals": state.get("goals", [])}


def graph_dot(graph: dict[str, Any]) -> str:
    shapes = {"world": "doublecircle", "character": "box", "variable": "note"}
    lines = ["digraph world {", "  rankdir=LR;", '  node [fontname="Helvetica"];']
    for node in graph["nodes"]:
        label = node["label"] + (f"\\n= {_short(json.dumps(node['value'], ensure_ascii=False), 40)}"
                                 if node["kind"] == "variable" else "")
        lines.append(f'  "{_dot(node["id"])}" [shape={shapes[node["kind"]]}, label="{_dot(label)}"];')
    for edge in graph["edges"]:
        label = f' [label="{_dot(edge.get("label", ""))}"]' if edge.get("label") else (
            " [style=dashed]" if edge["kind"] == "concerns" else "")
        lines.append(f'  "{_dot(edge["from"])}" -> "{_dot(edge["to"])}"{label};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def graph_svg(graph: dict[str, Any]) -> str:
    """A radial drawing: the world in the centre, characters on a ring, each variable next to
    what it concerns, relationship edges labelled. No Graphviz needed."""
    nodes = {n["id"]: n for n in graph["nodes"]}
    chars = [n for n in graph["nodes"] if n["kind"] == "character"]
    concerns = {e["from"]: e["to"] for e in graph["edges"] if e["kind"] == "concerns"}
    size, cx, cy = 1200, 600, 600
    pos: dict[str, tuple[float, float]] = {WORLD: (cx, cy)}
    for i, c in enumerate(chars):
        a = 2 * math.pi * i / max(1, len(chars)) - math.pi / 2
        pos[c["id"]] = (cx + 260 * math.cos(a), cy + 260 * math.sin(a))
    groups: dict[str, list[str]] = {}
    for var, owner in concerns.items():
        groups.setdefault(owner, []).append(var)
    for owner, variables in groups.items():
        ox, oy = pos[owner]
        base = math.atan2(oy - cy, ox - cx) if owner != WORLD else math.pi / 2
        radius = 150 if owner != WORLD else 120
        spread = min(math.pi * 0.9, 0.35 * len(variables)) if owner != WORLD else 2 * math.pi
        for j, var in enumerate(variables):
            a = base + (spread * (j / max(1, len(variables) - (0 if owner == WORLD else 1))) - spread / 2
                        if len(variables) > 1 else 0)
            pos[var] = (ox + radius * math.cos(a), oy + radius * math.sin(a))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" font-family="Helvetica" '
           'font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    for e in graph["edges"]:
        (x1, y1), (x2, y2) = pos[e["from"]], pos[e["to"]]
        style = {"relationship": 'stroke="#c0392b" stroke-width="2"', "contains": 'stroke="#999"',
                 "concerns": 'stroke="#bbb" stroke-dasharray="4 3"'}[e["kind"]]
        out.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" {style}/>')
        if e.get("label"):
            out.append(f'<text x="{(x1 + x2) / 2:.0f}" y="{(y1 + y2) / 2:.0f}" fill="#c0392b" '
                       f'text-anchor="middle">{html.escape(_short(e["label"], 30))}</text>')
    for node_id, (x, y) in pos.items():
        n = nodes[node_id]
        if n["kind"] == "variable":
            text = f"{n['label']} = {_short(json.dumps(n['value'], ensure_ascii=False), 28)}"
            out.append(f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="middle" fill="#1f4e79">{html.escape(text)}</text>')
        else:
            r, fill = (46, "#f4d03f") if n["kind"] == "world" else (40, "#aed6f1")
            out.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="{r}" fill="{fill}" stroke="#333"/>')
            out.append(f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle" font-weight="bold">'
                       f'{html.escape(_short(n["label"], 18))}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


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
    parser = argparse.ArgumentParser(prog="python -m agent.magnet.history",
                                     description="A Magnet run's world-state commit history and graph.")
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
