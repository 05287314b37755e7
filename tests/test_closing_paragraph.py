"""``Sampling.close_after_words``: a closing paragraph ends at its first sentence end once it holds
the words the story still needs (#35: the 135M model wrote every demo story's closing paragraph to
its token ceiling, about 270 words for 200 asked). The in-process engines stop decoding there; a
server is sent the request without it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent.llm.endpoint import EndpointLLM
from agent.llm.local_decoding import read_reply
from agent.llm.sampling import Sampling
from agent.magnet.runner import write_story
from agent.magnet.settings import MagnetSettings
from agent.settings import SMALL_PROSE
from agent.store import RunStore
from agent.testing import replies
from agent.testing.server import Answer, FakeServer
from agent.testing.story_llm import StoryLLM
from agent.text import close_point, count_words
from tests.magnet.stories import story

ROOT = Path(__file__).resolve().parents[1]
PROMPT = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper and a storm."}]


def ends_at_its_close_point(text: str, words: int) -> bool:
    """``text`` holds ``words`` words and ends at the first sentence end past them."""
    return count_words(text) >= words and close_point(text + " Then it was night.", words) == len(text.rstrip())


def test_the_close_point_is_the_first_sentence_end_past_the_words_with_a_sentence_after_it():
    text = 'One two three. Four five six! "Stop!" she cried. Seven eight. Nine'
    assert close_point(text, 3) == len("One two three.")
    assert close_point(text, 4) == len("One two three. Four five six!")
    assert close_point(text, 7) == len('One two three. Four five six! "Stop!" she cried.')  # not after "Stop!"
    assert close_point(text, 10) == len(text) - len(" Nine")
    assert close_point(text, 12) is None  # "Nine" would be the twelfth word: its sentence has nothing after it yet
    assert close_point("One two three. ", 2) is None


def test_a_reply_is_cut_at_its_close_point_and_ends_as_stopped():
    text = "One two three. Four five six. Seven"
    cut = read_reply(text, [1, 2, 3], eos_ids={0}, max_tokens=3, stop=None, runaway_stopped=False, close_after_words=4)
    assert cut == ("One two three. Four five six.", "stop")
    whole = read_reply(text, [1, 2, 3], eos_ids={0}, max_tokens=3, stop=None, runaway_stopped=False)
    assert whole == (text, "length")


@pytest.mark.embedded
def test_the_llamacpp_engine_stops_prose_at_its_close_point(llamacpp):
    _stops_at_its_close_point(llamacpp)


@pytest.mark.embedded
def test_the_transformers_engine_stops_prose_at_its_close_point(transformers_llm):
    _stops_at_its_close_point(transformers_llm)


def _stops_at_its_close_point(llm) -> None:
    sampling = Sampling(**SMALL_PROSE)
    on = {"temperature": 0.8, "max_tokens": 240, "min_tokens": 239, "seed": 7}  # no end of sequence before 239
    whole = llm.generate(PROMPT, **on, sampling=sampling)
    assert whole.finish_reason == "length" and count_words(whole.text) > 60  # written on to its ceiling
    closed = llm.generate(PROMPT, **on, sampling=sampling.model_copy(update={"close_after_words": 40}))
    assert closed.finish_reason == "stop" and ends_at_its_close_point(closed.text, 40), closed.text
    assert closed.usage.completion_tokens < 239  # before the floor, which only estimates the words


def test_a_server_is_sent_the_paragraph_without_the_close():
    server = FakeServer(
        {
            "GET *": lambda call: Answer(200, replies.model_list({"id": "m"})),
            "POST *": lambda call: Answer(200, replies.chat_reply("One two three. Four five six.", model="m")),
        }
    )
    recorded = []
    try:
        llm = EndpointLLM(server.root, "m")
        llm.recorders.append(recorded.append)
        sampling = Sampling(top_p=0.9, close_after_words=2)
        reply = llm.generate(PROMPT, temperature=0.8, max_tokens=50, sampling=sampling)
    finally:
        server.close()
    (body,) = server.bodies
    assert "close_after_words" not in json.dumps(body) and body["top_p"] == 0.9
    assert recorded[0].sampling == {"top_p": 0.9} and reply.text == "One two three. Four five six."


def _config(words: int, profile: str) -> dict:
    settings = MagnetSettings.parse(MagnetSettings.profile_settings(profile) if profile != "default" else {})
    return {**settings.as_config(), "story": story(words=words).to_dict()}


@pytest.mark.parametrize("profile", ["small", "default"])
def test_only_the_small_profiles_closing_paragraph_is_asked_to_close(tmp_path, profile):
    llm = StoryLLM()
    config = _config(600, profile)
    store = RunStore.create(tmp_path / "run", pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config)
    narrator = llm.by_role("narrator")
    assert len(narrator) > 1 and store.steps()[-1]["record"]["final_paragraph"]
    closes = [r.sampling.close_after_words for r in narrator]
    missing = 600 - sum(count_words(p.text) for p in store.paragraphs()[:-1])
    assert closes == ([None] * (len(narrator) - 1) + [missing] if profile == "small" else [None] * len(narrator))
    store.close()


@pytest.mark.embedded
def test_the_demo_story_closes_at_its_length(tmp_path):
    """``scripts/demo``'s story command, as the writer runs it, on the embedded model."""
    out = tmp_path / "demo"
    story_file = ROOT / "agent" / "magnet" / "examples" / "thriller_museum.toml"
    command = [sys.executable, "-m", "agent.cli", "write", "magnet", str(story_file), "--words", "200"]
    done = subprocess.run(
        [*command, "--profile", "small", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(out / "run.db") as db:
        ((text, finish, sampling),) = db.execute(
            "SELECT text, finish_reason, sampling FROM llm_calls WHERE role = 'narrator' AND error IS NULL"
        ).fetchall()
    assert json.loads(sampling)["close_after_words"] == 200
    # it stops at its close point; only a paragraph that never reaches one runs to its ceiling
    closed = finish == "stop" and ends_at_its_close_point(text, 200)
    assert closed or (finish == "length" and close_point(text, 200) is None), text
