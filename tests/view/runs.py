"""Real runs for the view's tests, written by the scripted models (no model, well under a second)."""

from __future__ import annotations

from pathlib import Path

from agent.magnet.runner import write_story as write_magnet
from agent.magnet.settings import MagnetSettings
from agent.nst import runner
from agent.nst.config import NST_DEFAULTS
from agent.store import RunStore
from agent.store import judgments as stored
from tests.magnet.story_llm import StoryLLM, story
from tests.nst.author import Author, chapter_of, gate_of

MISSING_QUOTE = "the keeper sold the lighthouse to a whale"


def nst_run(folder: Path, name: str = "keeper") -> Path:
    """A three-chapter NstAgent run whose chapter 2 is degraded (too short), with judgments."""
    config = {**NST_DEFAULTS, "prompt": "A lighthouse keeper finds a bell.", "prompt_id": None, "words": 2700,
              "plan_cache": str(folder / ".plans"), "llm": {"backend": "scripted", "model": "scripted-author"}}
    store = RunStore.create(folder / name, pipeline="nst", config=config, model="scripted-author",
                            backend="scripted")
    store.put_plan("title", "The Bell Keeper")
    author = Author(length=lambda request, attempt: 40 if chapter_of(request) == 2 else gate_of(request)[0])
    author.recorders.append(store.recorder)
    with store.session("start"):
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
    stored.put(store, kind="consistency", item="timeline_plot", judge="test-judge", protocol="p1", reply={
        "contradictions": [{"subtype": "duration_contradictions", "exact_quote": first, "quote_chapter": 1,
                            "contradicting_quote": last, "contradicting_chapter": 3,
                            "explanation": "The walk takes an hour in one place and a day in the other."},
                           {"subtype": "causeless_effects", "exact_quote": MISSING_QUOTE, "quote_chapter": 2,
                            "contradicting_quote": last, "contradicting_chapter": 3,
                            "explanation": "An invented quote."}]})
    stored.put(store, kind="consistency", item="world_building", judge="test-judge", protocol="p1",
               error="judge reply was not valid JSON")


def magnet_run(folder: Path, name: str = "codicil") -> Path:
    config = {**MagnetSettings().as_config(), "story": story(words=400).to_dict()}
    store = RunStore.create(folder / name, pipeline="magnet", config=config, unit_kind="step",
                            model="story-llm", backend="scripted")
    with store.session("start"):
        write_magnet(store, StoryLLM(), config)
    store.close()
    return folder / name


def crowded_magnet_run(folder: Path, name: str = "crowded") -> Path:
    """A Magnet run with a cast of five, each related both ways to two others, secrets, long values
    and up to 20 variables a character (the world graph's readability test)."""
    from tests.magnet.story_llm import story_dict

    names = ["Julian Reyes", "Ann", "Bob", "Cy", "Dora <&> Vale"]
    cast = [{**story_dict()["characters"][1], "name": who, "role": f"role {i}",
             "location": "the long gallery of the east wing",
             "relationships": {names[(i + 1) % 5]: f"owes money to {names[(i + 1) % 5]}",
                               names[(i - 1) % 5]: f"distrusts {names[(i - 1) % 5]} since the funeral"},
             "state": {f"var_{j}": f"a fairly long value number {j} for {who}, as a writer would keep it"
                       for j in range(4 + 4 * i)},
             "secrets": {"hidden_motive": "wants the house for herself"} if i % 2 else {}}
            for i, who in enumerate(names)]
    config = {**MagnetSettings().as_config(),
              "story": story(words=150, characters=cast, world={f"w{j}": j for j in range(8)}).to_dict()}
    store = RunStore.create(folder / name, pipeline="magnet", config=config, unit_kind="step",
                            model="story-llm", backend="scripted")
    with store.session("start"):
        write_magnet(store, StoryLLM(), config)
    store.close()
    return folder / name


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
