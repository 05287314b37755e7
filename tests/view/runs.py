"""Real runs for the view's tests, written by the scripted models (no model, well under a second)."""

from __future__ import annotations

from pathlib import Path

from agent.magnet.runner import write_story as write_magnet
from agent.magnet.settings import MagnetSettings
from agent.nst import runner
from agent.nst.config import NST_DEFAULTS
from agent.store import RunStore
from agent.store import judgments as stored
from agent.testing.author import Author, chapter_of, gate_of
from agent.testing.story_llm import StoryLLM
from tests.magnet.stories import story

MISSING_QUOTE = "the keeper sold the lighthouse to a whale"


def nst_run(folder: Path, name: str = "keeper") -> Path:
    """A three-chapter NstAgent run whose chapter 2 is degraded (too short), with judgments."""
    config = {
        **NST_DEFAULTS,
        "prompt": "A lighthouse keeper finds a bell.",
        "prompt_id": None,
        "words": 2700,
        "plan_cache": str(folder / ".plans"),
        "llm": {"backend": "scripted", "model": "scripted-author"},
    }
    store = RunStore.create(folder / name, pipeline="nst", config=config, model="scripted-author", backend="scripted")
    store.plans.put("title", "The Bell Keeper")
    author = Author(length=lambda request, attempt: 40 if chapter_of(request) == 2 else gate_of(request)[0])
    author.recorders.append(store.ledger.recorder)
    with store.sessions.hold("start"):
        runner.write_story(store, author, config)
    add_judgments(store)
    store.close()
    return folder / name


def quotes(store: RunStore) -> tuple[str, str]:
    """A sentence of chapter 1 and one of chapter 3, as a judge would quote them."""
    first = store.chapter(1).text.split(". ")[2] + "."
    last = store.chapter(3).text.split(". ")[1] + "."
    return first, last


def add_judgments(store: RunStore) -> None:
    first, last = quotes(store)
    stored.put(
        store,
        kind="consistency",
        item="timeline_plot",
        judge="test-judge",
        protocol="p1",
        reply={
            "contradictions": [
                {
                    "subtype": "duration_contradictions",
                    "exact_quote": first,
                    "quote_chapter": 1,
                    "contradicting_quote": last,
                    "contradicting_chapter": 3,
                    "explanation": "The walk takes an hour in one place and a day in the other.",
                },
                {
                    "subtype": "causeless_effects",
                    "exact_quote": MISSING_QUOTE,
                    "quote_chapter": 2,
                    "contradicting_quote": last,
                    "contradicting_chapter": 3,
                    "explanation": "An invented quote.",
                },
            ]
        },
    )
    stored.put(
        store,
        kind="consistency",
        item="world_building",
        judge="test-judge",
        protocol="p1",
        error="judge reply was not valid JSON",
    )


def magnet_run(folder: Path, name: str = "codicil") -> Path:
    config = {**MagnetSettings().as_config(), "story": story(words=400).to_dict()}
    store = RunStore.create(
        folder / name, pipeline="magnet", config=config, unit_kind="step", model="story-llm", backend="scripted"
    )
    with store.sessions.hold("start"):
        write_magnet(store, StoryLLM(), config)
    store.close()
    return folder / name


def crowded_magnet_run(folder: Path, name: str = "crowded") -> Path:
    """A Magnet run with a cast of five, each related both ways to two others, secrets, long values
    and up to 20 variables a character (the world graph's readability test)."""
    from agent.testing.story_llm import story_dict

    names = ["Julian Reyes", "Ann", "Bob", "Cy", "Dora <&> Vale"]
    cast = [
        {
            **story_dict()["characters"][1],
            "name": who,
            "role": f"role {i}",
            "location": "the long gallery of the east wing",
            "relationships": {
                names[(i + 1) % 5]: f"owes money to {names[(i + 1) % 5]}",
                names[(i - 1) % 5]: f"distrusts {names[(i - 1) % 5]} since the funeral",
            },
            "state": {
                f"var_{j}": f"a fairly long value number {j} for {who}, as a writer would keep it"
                for j in range(4 + 4 * i)
            },
            "secrets": {"hidden_motive": "wants the house for herself"} if i % 2 else {},
        }
        for i, who in enumerate(names)
    ]
    config = {  # paragraphs of 160 tokens (~120 words): step 1 is not the final one, a second step follows
        **MagnetSettings(paragraph_tokens=160).as_config(),
        "story": story(words=150, characters=cast, world={f"w{j}": j for j in range(8)}).to_dict(),
    }
    store = RunStore.create(
        folder / name, pipeline="magnet", config=config, unit_kind="step", model="story-llm", backend="scripted"
    )
    with store.sessions.hold("start"):
        write_magnet(store, StoryLLM(), config)
    store.close()
    return folder / name


EDITED_WORDS = "The keeper rewrote this chapter by hand: the bell was never found, only its rope."


def edited_nst_run(folder: Path, name: str = "edited") -> Path:
    """A seven-chapter NstAgent run whose chapter 3 was edited twice by hand (three versions), so that
    chapters 4-7 are stale."""
    from agent.store.writer.edit import edit_chapter

    config = {
        **NST_DEFAULTS,
        "prompt": "A lighthouse keeper finds a bell.",
        "prompt_id": None,
        "words": 6600,
        "plan_cache": str(folder / ".plans"),
        "llm": {"backend": "scripted", "model": "scripted-author"},
    }
    store = RunStore.create(folder / name, pipeline="nst", config=config, model="scripted-author", backend="scripted")
    author = Author()
    author.recorders.append(store.ledger.recorder)
    with store.sessions.hold("start"):
        runner.write_story(store, author, config)
    text = store.chapter(3).text
    first, rest = text.split("\n\n", 1)
    edit_chapter(store, 3, first + "\n\n" + EDITED_WORDS + "\n\n" + rest)
    edit_chapter(
        store,
        3,
        first
        + "\n\n"
        + EDITED_WORDS.replace("only its rope", "only its frayed rope")
        + "\n\n"
        + rest.replace(" bell ", " brass bell ", 1),
    )
    store.close()
    return folder / name


def rollsum_run(folder: Path, name: str = "summary") -> Path:
    """A three-chapter RollSum run (its state is one rolling summary)."""
    from agent.nst.baselines.rollsum import write_story as write_rollsum
    from agent.nst.config import ROLLSUM_DEFAULTS, RollSumConfig

    config = {
        **ROLLSUM_DEFAULTS,
        "prompt": "A ferryman counts the drowned.",
        "prompt_id": None,
        "words": 2700,
        "plan_cache": str(folder / ".plans"),
        "llm": {"backend": "scripted", "model": "scripted-author"},
    }
    store = RunStore.create(
        folder / name, pipeline="rollsum", config=config, model="scripted-author", backend="scripted"
    )
    author = Author()
    author.recorders.append(store.ledger.recorder)
    with store.sessions.hold("start"):
        write_rollsum(store, author, RollSumConfig.coerce(config))
    store.close()
    return folder / name


def edit_a_step(run_dir: Path, step: int = 1) -> None:
    """Edit the first paragraph of a Magnet step by hand (a second version of that step)."""
    from agent.store.writer.edit import edit_step

    with RunStore.open(run_dir) as store:
        texts = [p.text for p in store.paragraphs() if p.step == step]
        edit_step(store, step, [texts[0] + " The clock in the gallery stopped.", *texts[1:]])


def batch_folder(folder: Path) -> Path:
    """A batch of four short stories in ``folder/night``: one done, one running, one failed, one pending."""
    import json
    import os
    import socket
    import sqlite3

    import pytest

    from agent.batch import run_batch
    from agent.llm.options import LLMOptions

    prompts = folder / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": i, "prompt": f"Story {i}: a bell rings at sea."}) + "\n" for i in (1, 2, 3, 4))
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FABULA_HOME", str(folder / "home"))
        assert run_batch(
            folder / "night", "direct", prompts=prompts, words=1000, llm=LLMOptions("embedded"), model=Author()
        ).complete
    conn = sqlite3.connect(folder / "night" / "batch.db")
    with conn:  # as a batch in flight leaves it
        conn.execute(
            "UPDATE stories SET status = 'running', pid = ?, host = ? WHERE key = '2'",
            (os.getpid(), socket.gethostname()),
        )
        conn.execute("UPDATE stories SET status = 'failed', error = '<b>the server went away</b>' WHERE key = '3'")
        conn.execute(
            "UPDATE stories SET status = 'pending', words = 0, units = 0, prompt_tokens = 0, "
            "completion_tokens = 0 WHERE key = '4'"
        )
    conn.close()
    return folder / "night"


def wait_for_unit(run_dir: Path, unit: int, timeout: float = 30.0) -> None:
    """Wait until a run being written in another process has committed ``unit`` (0: exists)."""
    import time

    from agent.store import StoreError
    from agent.store.readonly import open_readonly

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open_readonly(run_dir) as store:
                if store.info().last_unit >= unit:
                    return
        except (StoreError, OSError):  # not created yet, or created but not yet written
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{run_dir} did not reach unit {unit} in {timeout} s")
