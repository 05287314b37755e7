"""One Magnet timestep (the paper's algorithm, Section 3) and the state it carries forward.

Actions + critic revision -> narrator selection, order and paragraph -> world-state commit
of the selected actions only, in the narrator's order -> goal sequencing (a domain shift
every ``shift_every`` steps, else a replacement after ``stall_steps`` steps without
completion, else the next goal when a selected action completed the current one) -> ending
control. The whole carried state is one JSON value, committed with the step, so a resumed
run continues exactly where the last committed step left it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.llm import LLM, LLMError
from agent.llm.budget import Budget
from agent.magnet import ending
from agent.magnet.definition import StoryDefinition
from agent.magnet.prompts import NO_MEMORY, Memory
from agent.magnet.roles import Scene, narrate, next_goal, propose_actions
from agent.magnet.settings import MagnetSettings
from agent.magnet.world import WorldGraph
from agent.text import count_words


def initial_state(story: StoryDefinition, settings: MagnetSettings) -> dict[str, Any]:
    """The state before step 1: the initial world graph and the user's high-level goal."""
    world = WorldGraph.from_definition(story).to_json() if settings.structured_state else None
    return {
        "world": world,
        "goal": story.goal,
        "goals": [{"goal": story.goal, "step": 0, "reason": "initial"}],
        "stall": 0,
        "words": 0,
        "narrations": 0,
        "narration_words": 0,
        "ending": False,
        "final_next": False,
        "finished": False,
        "finish_reason": None,
        "beat": 0,
        "chapter": 1,
        "chapter_next": False,
        "recap": "",
        "recap_step": 0,
    }


def chapter_of(story: StoryDefinition, state: dict[str, Any], step: int) -> int:
    """The chapter step ``step`` opens or continues (updates ``state``): a new one every
    ``chapter_every`` steps, or after each goal change with ``chapter_every = "goal"``."""
    chapter = state.get("chapter", 1)
    every = story.chapter_every
    if step > 1 and (
        (every == "goal" and state.get("chapter_next")) or (isinstance(every, int) and (step - 1) % every == 0)
    ):
        chapter += 1
    state["chapter"], state["chapter_next"] = chapter, False
    return chapter


@dataclass
class StepOutcome:
    paragraphs: list[str | tuple[str, str]]
    state: dict[str, Any]
    record: dict[str, Any]


def run_step(
    llm: LLM,
    story: StoryDefinition,
    settings: MagnetSettings,
    state: dict[str, Any],
    step: int,
    recent: list[str],
    memory: Memory = NO_MEMORY,
    budget: Budget | None = None,
) -> StepOutcome:
    """Run timestep ``step`` from ``state`` (not modified); returns what to commit. ``budget``:
    the run's context budget; what the step's prompts gave up to fit it is in the record."""
    state = _copy(state)
    world = WorldGraph.from_json(state["world"]) if state["world"] is not None else None
    if world is not None:
        state["world"] = world.to_json()  # an older run's world, read once in today's shape
    final_paragraph = ending.is_final_paragraph(story, settings, state)
    chapter = chapter_of(story, state, step)
    scene = Scene(
        story,
        world,
        state["goal"],
        list(recent),
        ending.cue(story, settings, state),
        memory,
        list(memory.failures),
        budget=budget,
        step=step,
    )

    results = propose_actions(llm, scene, settings)
    actions = [a for a in results if a.attempts]
    if not actions:
        causes = [r.error for r in results if r.error]
        raise LLMError(f"step {step}: no character produced an action" + (f" ({causes[0]})" if causes else ""))
    narration = narrate(
        llm,
        scene,
        settings,
        actions,
        budget=ending.final_budget(story, settings, state) if final_paragraph else None,
        close_after_words=ending.close_after_words(story, settings, state) if final_paragraph else None,
    )

    commits, goal_reached = _commit_selected(world, step, narration, actions)
    state["world"] = world.to_json() if world is not None else None

    paragraphs: list[str | tuple[str, str]] = [narration.paragraph]
    words = count_words(narration.paragraph)
    state["narrations"] += 1
    state["narration_words"] += words
    state["words"] += words

    goal_before = state["goal"]
    # A story that has just ended needs no next goal and no transition into it.
    ended = ending.stop_reason(story, state, final_paragraph) is not None
    event = (
        None
        if ended
        else sequence_goal(llm, story, settings, state, step, goal_reached, scene, [*recent, narration.paragraph])
    )
    if event and event.get("transition"):
        paragraphs.append(("transition", event["transition"]))
        state["words"] += count_words(event["transition"])

    reason = ending.stop_reason(story, state, final_paragraph)
    if reason is not None:
        state["finished"], state["finish_reason"] = True, reason
    trace = StepTrace(
        step,
        goal_before,
        chapter,
        results,
        actions,
        narration,
        commits,
        goal_reached,
        event,
        scene,
        memory,
        final_paragraph,
    )
    return StepOutcome(paragraphs, state, trace.record(state, settings))


def _commit_selected(world: WorldGraph | None, step: int, narration: Any, actions: list[Any]) -> tuple[list[Any], bool]:
    """World-state commit: selected actions only, in the narrator's order (Section 3.3); and
    whether a selected action reached the goal."""
    by_name = {a.character: a for a in actions}
    commits = []
    goal_reached = False
    for order, name in enumerate(narration.order):
        chosen = by_name[name]
        if world is not None:
            commits.extend(world.apply(step, order, name, chosen.action, chosen.updates))
        goal_reached = goal_reached or chosen.goal_reached
    return commits, goal_reached


@dataclass(frozen=True)
class StepTrace:
    """What a timestep did, role by role: the makings of its record."""

    step: int
    goal_before: str | None
    chapter: int | None
    results: list[Any]
    actions: list[Any]
    narration: Any
    commits: list[Any]
    goal_reached: bool
    event: dict[str, Any] | None
    scene: Scene
    memory: Memory
    final_paragraph: bool

    def record(self, state: dict[str, Any], settings: MagnetSettings) -> dict[str, Any]:
        """The step's record (the ``steps`` table): what each role did, what was committed, what gave way."""
        narration, scene, event = self.narration, self.scene, self.event
        return {
            "step": self.step,
            "goal": self.goal_before,
            "chapter": self.chapter,
            "actions": [a.as_dict() for a in self.actions],
            "selected": narration.order,
            "unselected": [a.character for a in self.actions if a.character not in narration.order],
            "sat_out": [a.character for a in self.results if not a.attempts],
            "commits": [c.as_dict() for c in self.commits],
            "rejected_updates": narration.rejected,
            "goal_reached": self.goal_reached,
            "goal_event": {k: v for k, v in event.items() if k != "transition"} if event else None,
            "selection_fallback": narration.selection_fallback,
            "failures": scene.failures,
            "memory": {
                "recalled": len(scene.memory.recalled),
                "recap_words": count_words(scene.memory.recap),
                **({"recalled_found": len(self.memory.recalled)} if scene.gave_way else {}),
            },
            "budget": list(scene.gave_way),
            "paragraph_trimmed": narration.trimmed,
            "final_paragraph": self.final_paragraph,
            "stall": state["stall"],
            "words_total": state["words"],
            "ablations": settings.ablations(),
        }


def sequence_goal(
    llm: LLM,
    story: StoryDefinition,
    settings: MagnetSettings,
    state: dict[str, Any],
    step: int,
    goal_reached: bool,
    scene: Scene,
    recent: list[str],
) -> dict[str, Any] | None:
    """Goal sequencing and the ending's concluding goal; updates ``state``, returns the event."""
    if ending.should_conclude(story, settings, state):
        state["ending"] = True
        if not settings.goal_shift:
            return {"kind": "conclude", "goal": state["goal"], "note": "goal sequencing ablated: narrator cue only"}
        return _new_goal(llm, story, settings, state, step, scene, recent, "conclude")
    if not settings.goal_shift:
        return None
    if state["ending"]:
        # The concluding goal stands until the end; once reached, the next paragraph closes the story.
        if goal_reached:
            state["final_next"] = True
            return {"kind": "concluded", "goal": state["goal"]}
        return None
    if step % settings.shift_every == 0:
        return _new_goal(llm, story, settings, state, step, scene, recent, "shift")
    if state["stall"] >= settings.stall_steps:
        return _new_goal(llm, story, settings, state, step, scene, recent, "stalled")
    if goal_reached:
        return _new_goal(llm, story, settings, state, step, scene, recent, "complete")
    state["stall"] += 1
    return None


def _new_goal(
    llm: LLM,
    story: StoryDefinition,
    settings: MagnetSettings,
    state: dict[str, Any],
    step: int,
    scene: Scene,
    recent: list[str],
    status: str,
) -> dict[str, Any]:
    world = WorldGraph.from_json(state["world"]) if state["world"] is not None else None
    now = Scene(
        story,
        world,
        state["goal"],
        recent[-settings.history_window :],
        scene.ending,
        scene.memory,
        scene.failures,
        budget=scene.budget,
        gave_way=scene.gave_way,
        step=step,
    )
    prior = [g["goal"] for g in state["goals"]]
    index = state.get("beat", 0)
    beat = story.beats[index] if status != "conclude" and index < len(story.beats) else None
    made = next_goal(llm, now, settings, prior, status, beat)
    if made is None:  # recorded in the step's failures; the current goal stands
        state["stall"] = 0 if status in ("shift", "stalled") else state["stall"]
        return {"kind": "failed", "goal": state["goal"], "attempted": status}
    goal, transition = made
    state["goal"] = goal
    state["goals"].append({"goal": goal, "step": step, "reason": status, **({"beat": beat} if beat else {})})
    state["stall"] = 0
    state["chapter_next"] = True
    if beat:
        state["beat"] = index + 1
    return {
        "kind": status,
        "goal": goal,
        "previous": scene.goal,
        "transition": transition,
        **({"beat": beat} if beat else {}),
    }


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(state))
