"""``fabula edit --chapter N`` re-derives the edited chapter's state from the edited text (issue 12),
with the scripted author: one update call through the chapter loop's update path, evidence
checked against the edited text; a failed call leaves the edit committed and the run resumable."""

from __future__ import annotations

import pytest

from agent import pipelines
from agent.cli import main
from agent.llm import EndpointUnavailableError
from agent.nst.config import NST_DEFAULTS, ROLLSUM_DEFAULTS
from agent.store import RunStore
from agent.store.lineage.fork import STALE_KEY
from agent.testing.author import Author, default_policy, update_json
from tests.nst.queued import QueuedModels

EDITED = (
    "Zebulon the cartographer rowed out alone to the drowned chapel at dawn. He found the bell wrapped in "
    "a torn sail and carried it back to the lighthouse without a word. The keeper watched him climb the "
    "stairs and said nothing about the storm that was coming from the west."
)


@pytest.fixture
def models(monkeypatch) -> QueuedModels:
    return QueuedModels(monkeypatch)


def nst_run(tmp_path, name: str = "run", pipeline: str = "nst") -> str:
    defaults = NST_DEFAULTS if pipeline == "nst" else ROLLSUM_DEFAULTS
    config = {
        **defaults,
        "prompt": "A keeper finds a bell.",
        "prompt_id": None,
        "words": 2700,
        "plan_cache": str(tmp_path / "plans"),
    }
    run_dir = tmp_path / name
    pipelines.start(run_dir, pipeline, config, pipelines.LLMOptions(backend="scripted", model="a")).close()
    return str(run_dir)


def edit(run_dir: str, tmp_path, text: str = EDITED, *extra: str, chapter: int = 2) -> int:
    path = tmp_path / f"ch{chapter}.md"
    path.write_text(text, encoding="utf-8")
    return main(["edit", run_dir, "--chapter", str(chapter), "--file", str(path), *extra])


def occurs(quote: str, text: str) -> bool:
    return " ".join(quote.split()) in " ".join(text.split())


def test_the_state_after_an_edit_follows_from_the_edited_text(tmp_path, models, capsys):
    run_dir = nst_run(tmp_path)
    with RunStore.open(run_dir, readonly=True) as store:
        old_text, old_state, state_1, state_3 = store.chapter(2).text, store.state(2), store.state(1), store.state(3)
        calls_before = len(store.ledger.llm_calls())
    assert old_state["narrative"]["past_events"]
    assert edit(run_dir, tmp_path) == 0
    err = capsys.readouterr().err
    line = [ln for ln in err.splitlines() if "re-derived" in ln]
    assert len(line) == 1 and "state after chapter 2 was re-derived from the edited text (one update call" in line[0]
    assert "chapter 3 was written before the edit and is marked stale" in line[0]
    with RunStore.open(run_dir, readonly=True) as store:
        state = store.state(2)
        chapter_2 = [q for q, entry in _provenance(state) if entry["chapter"] == 2]
        # every entry the update added for chapter 2 quotes the edited text, none the old one
        assert chapter_2 and all(occurs(q, EDITED) for q in chapter_2), chapter_2
        assert not any(occurs(q, old_text) for q in chapter_2)
        # derived from the state after chapter 1, not from the stale state after 2
        for key in state_1["narrative"]["past_events"]:
            assert state["narrative"]["past_events"][key] == state_1["narrative"]["past_events"][key]
        assert state["narrative"] != old_state["narrative"]
        assert state["tokens_per_word"] == old_state["tokens_per_word"] and state["rederived"]["version"] == 2
        assert store.state(3) == state_3  # later chapters are not re-derived: they are marked stale
        stale = store.plans.get(STALE_KEY)
        assert stale["state_stale_from"] == 3 and stale["state_rederived"] is True
        # one call, attributed to chapter 2, in a session of its own; the run is still completed
        new = store.query("SELECT role, unit FROM llm_calls ORDER BY id")[calls_before:]
        assert [tuple(r) for r in new] == [("nst_turn", 2)]
        assert store.query("SELECT kind FROM sessions ORDER BY id DESC LIMIT 1")[0][0] == "rederive"
        assert store.info().status == "completed"
        update = [t for t in store.ledger.tool_calls(2) if t.tool == "update"][-1]
        assert update.ok and update.arguments.get("fallback") is True
        request = models.opened[-1].requests[-1]
        assert request.messages[-2]["content"] == EDITED  # the edited text is what the model updated from


def _provenance(state: dict) -> list[tuple[str, dict]]:
    provenance = state["narrative"].get("provenance", {})
    return [(entry["quote"], entry) for collection in provenance.values() for entry in collection.values()]


def stale_quoter(request, tools):
    """A model that ignores the edit: its update quotes the chapter as it was before."""
    if "update" in tools:
        return update_json(2, text=STALE_TEXT[0])
    return default_policy(request, tools)


STALE_TEXT: list[str] = [""]


def test_evidence_is_checked_against_the_edited_text(tmp_path, models, capsys):
    run_dir = nst_run(tmp_path)
    with RunStore.open(run_dir, readonly=True) as store:
        STALE_TEXT[0], old_state = store.chapter(2).text, store.state(2)
    models.queue.append(Author(policy=stale_quoter))
    assert edit(run_dir, tmp_path) == 1
    err = capsys.readouterr().err
    assert "was not re-derived: the update call failed" in err and "does not occur in chapter 2" in err
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.state(2) == old_state and store.chapter(2).text == EDITED
        assert store.plans.get(STALE_KEY)["state_stale_from"] == 2


def test_a_failed_update_call_leaves_the_edit_committed_and_the_run_resumable(tmp_path, models, capsys):
    run_dir = nst_run(tmp_path, "orig")
    fork = str(tmp_path / "fork")
    assert main(["fork", run_dir, "--at", "2", "--out", fork, "--no-run"]) == 0  # a run stopped after chapter 2
    with RunStore.open(fork, readonly=True) as store:
        old_state = store.state(2)

    class Down(Author):
        def _complete(self, request):
            raise EndpointUnavailableError("the server at http://127.0.0.1:9 is not reachable")

    models.queue.append(Down())
    assert edit(fork, tmp_path) == 1
    err = capsys.readouterr().err
    assert "stored version 2" in err and "not reachable" in err and "to retry" in err
    with RunStore.open(fork, readonly=True) as store:
        assert store.chapter(2).text == EDITED and store.chapter(2).version == 2
        assert store.state(2) == old_state and store.info().status == "stopped"
        stale = store.plans.get(STALE_KEY)
        assert stale["state_stale_from"] == 2 and stale["state_rederived"] is False
        assert store.query("SELECT outcome FROM sessions ORDER BY id DESC LIMIT 1")[0][0] == "stopped"

    class Interrupted(Author):  # Ctrl-C during the call: the same, and still resumable
        def _complete(self, request):
            raise KeyboardInterrupt

    models.queue.append(Interrupted())
    assert edit(fork, tmp_path) != 0
    with RunStore.open(fork, readonly=True) as store:
        assert store.state(2) == old_state and store.info().status == "stopped"
        assert store.plans.get(STALE_KEY)["state_stale_from"] == 2
    # the same text again re-derives what was left stale; then the run resumes from the edit
    assert edit(fork, tmp_path) == 0
    assert "unchanged; its state is stale: re-deriving it" in capsys.readouterr().err
    with RunStore.open(fork, readonly=True) as store:
        assert store.state(2) != old_state and store.plans.get(STALE_KEY) is None
    assert main(["resume", fork]) == 0
    with RunStore.open(fork, readonly=True) as store:
        assert store.info().status == "completed" and [c.index for c in store.chapters()] == [1, 2, 3]
    with RunStore.open(fork, readonly=True) as store:  # chapter 3 went on from the re-derived state
        carried = [q for q, entry in _provenance(store.state(3)) if entry["chapter"] == 2]
        assert carried and all(occurs(q, EDITED) for q in carried)


def test_no_rederive_skips_the_model_and_marks_the_state_stale(tmp_path, models, capsys):
    run_dir = nst_run(tmp_path)
    opened = len(models.opened)
    with RunStore.open(run_dir, readonly=True) as store:
        old_state = store.state(3)
    assert edit(run_dir, tmp_path, EDITED, "--no-rederive", chapter=3) == 0
    assert "was not re-derived (--no-rederive)" in capsys.readouterr().err
    assert len(models.opened) == opened
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.state(3) == old_state and store.plans.get(STALE_KEY)["state_stale_from"] == 3
    # the last chapter, re-derived: nothing is stale any more
    assert edit(run_dir, tmp_path, EDITED, chapter=3) == 0
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.plans.get(STALE_KEY) is None and store.state(3) != old_state


class Summarizer(Author):
    """RollSum's summary names the chapter it summarises by its first words."""

    def reply(self, request):
        if request.role == "rollsum_summary":
            chapter = request.messages[-1]["content"].split("New chapter", 1)[1]
            return "Summary: " + " ".join(chapter.split(":", 1)[1].split()[:6]), "stop"
        return super().reply(request)


def test_rollsum_re_derives_its_summary_from_the_edited_chapter(tmp_path, models, capsys):
    models.queue.append(Summarizer())
    run_dir = nst_run(tmp_path, pipeline="rollsum")
    models.queue.append(Summarizer())
    assert edit(run_dir, tmp_path) == 0
    assert "the summary after chapter 2 was re-derived from the edited text" in capsys.readouterr().err
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.state(2)["summary"] == "Summary: Zebulon the cartographer rowed out alone"
        assert store.query("SELECT role, unit FROM llm_calls ORDER BY id DESC LIMIT 1")[0][:] == ("rollsum_summary", 2)
