"""``fabula derive`` on the real tiny model (issue 24, item 2): the first two chapters of Moby-Dick,
cut to their opening paragraphs so the test stays under a minute on two cores. Each chapter gets one
real update call through NstAgent's update path; what it applied quotes that chapter's own text (the
evidence check), or the chapter is marked failed and derive would retry it."""

from __future__ import annotations

import pytest

from agent import pipelines
from agent.cli import main
from agent.store import RunStore
from tests.manuscript.books import chapters_by_hand, moby_dick

WORDS_PER_CHAPTER = 60


def opening(lines: list[str], words: int) -> str:
    """The chapter's first paragraphs, cut after the sentence that passes ``words`` words."""
    text = " ".join(" ".join(lines).split())
    out, count = [], 0
    for sentence in text.replace(". ", ".\n").split("\n"):
        out.append(sentence)
        count += len(sentence.split())
        if count >= words:
            break
    return " ".join(out)


@pytest.mark.embedded  # 10 s on the llama.cpp engine
def test_derive_the_first_chapters_of_moby_dick_on_the_tiny_model(tmp_path, embedded_llm, monkeypatch, capsys):
    chapters = chapters_by_hand(moby_dick())[:2]
    source = tmp_path / "moby-2.txt"
    source.write_text(
        "\n\n".join(f"{heading}\n\n{opening(lines, WORDS_PER_CHAPTER)}" for heading, lines in chapters) + "\n",
        encoding="utf-8",
    )
    run = tmp_path / "moby"
    assert main(["import", str(source), "--out", str(run)]) == 0
    monkeypatch.setattr(embedded_llm, "close", lambda: None)  # the session's model outlives the command
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: embedded_llm)
    code = main(["derive", str(run), "--backend", "embedded", "--update-max-tokens", "200"])
    err = capsys.readouterr().err
    print(err)
    assert code in (0, 1)
    assert err.count("derive: chapter") == 2 and "ETA" in err
    with RunStore.open(run, readonly=True) as store:
        rows = store.query("SELECT role, unit FROM llm_calls ORDER BY id")
        calls = [tuple(r) for r in rows]  # one update per chapter; a looped reply is asked once more
        assert {role for role, _ in calls} == {"nst_turn"} and sorted({u for _, u in calls}) == [1, 2]
        assert all(sum(1 for _, u in calls if u == unit) <= 2 for unit in (1, 2)), calls
        derived = 0
        for chapter in store.chapters():
            state = store.state(chapter.index)
            if state["derived"]["ok"]:
                derived += 1
                quotes = [
                    e["quote"]
                    for c in state["narrative"].get("provenance", {}).values()
                    for e in c.values()
                    if e["chapter"] == chapter.index
                ]
                assert all(" ".join(q.split()) in " ".join(chapter.text.split()) for q in quotes), quotes
            else:
                assert "narrative" not in state and state["derived"]["error"]
        assert (code == 0) == (derived == 2)
        assert store.info().status == "completed"
