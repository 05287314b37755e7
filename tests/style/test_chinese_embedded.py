"""A Chinese prompt on the real embedded model: one short chapter (the Direct writer), told to write
in the prompt's language, counted as fabula counts CJK (one word a character). The prompt is real
public-domain Chinese prose (Tao Yuanming's *Peach Blossom Spring*, c. 421) with a writer's request."""

from __future__ import annotations

import pytest

from agent.nst.baselines import direct
from agent.nst.config import DirectConfig
from agent.store import RunStore
from agent.text import count_words

PROMPT = (
    "晋太元中，武陵人捕鱼为业。缘溪行，忘路之远近。忽逢桃花林，夹岸数百步，中无杂树，芳草鲜美，落英缤纷。"
    "请以此为开头，写渔人离开桃花源之后再也找不到它的故事。"
)


@pytest.mark.embedded
@pytest.mark.slow
def test_a_chinese_prompt_gets_one_chapter_on_the_embedded_model(tmp_path, embedded_llm):
    config = DirectConfig.coerce({"prompt": PROMPT, "words": 60, "attempts": 1})
    store = RunStore.create(
        tmp_path / "run", pipeline="direct", config={**config.stored(), "llm": {"backend": "embedded", "model": None}}
    )
    embedded_llm.recorders.append(store.ledger.recorder)
    try:
        with store.sessions.hold("start"):
            direct.write_story(store, embedded_llm, config)
    finally:
        embedded_llm.recorders.remove(store.ledger.recorder)
    calls = store.ledger.llm_calls()
    assert calls and "write everything in Chinese" in calls[0].messages[1]["content"]
    chapter = store.chapter(1)
    assert chapter is not None and chapter.words == count_words(chapter.text)
    print(chapter.words, chapter.degraded, chapter.text[:200])
    store.close()
