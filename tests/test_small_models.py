"""Small models write instead of looping (#16): sampling controls reach every backend's request,
the repetition guard rejects a looping draft quoting its span, trimming, and the small profile."""

from __future__ import annotations

import json

import pytest

from agent.errors import ConfigError
from agent.gate import Gate
from agent.llm import TruncatedOutputError, UnsupportedSettingError
from agent.llm.embedded import _OccurrencePenalty, sampling_kwargs
from agent.llm.endpoint import EndpointLLM
from agent.llm.sampling import Sampling
from agent.magnet.settings import MagnetSettings
from agent.nst.chapter.drafter import Drafter, Guard, draft_until_gate, whole_sentences
from agent.nst.chapter.sizing import size_tokens
from agent.nst.config import NstConfig
from agent.repetition import is_looping, measure
from agent.settings import SMALL_PROSE, SMALL_PROSE_LONG_PROMPTS, SMALL_STRUCTURED, SMALL_STRUCTURED_LONG_PROMPTS
from agent.store import RunStore
from agent.testing.scripted import ScriptedLLM
from tests.test_endpoint_protocol import USER, QueueServer, chat_reply

EVERY = Sampling(repetition_penalty=1.2, frequency_penalty=0.4, presence_penalty=0.2, top_p=0.9, top_k=40, min_p=0.05)
LOOP = "The gala was about to begin, and the museum was about to unveil the astrolabe. " * 8


@pytest.fixture
def fake():
    server = QueueServer()
    yield server
    server.close()


def test_every_sampling_control_reaches_the_server_request(fake):
    fake.queue.append((200, chat_reply("ok")))
    llm = EndpointLLM(fake.root, "m")
    llm.generate(USER, temperature=0.7, max_tokens=8, sampling=EVERY)
    body = fake.bodies[0]
    assert {k: body[k] for k in EVERY.given()} == EVERY.given()


def test_a_control_the_server_cannot_honour_is_refused_in_one_line(fake):
    llm = EndpointLLM(fake.root, "m")
    with pytest.raises(UnsupportedSettingError, match="no_repeat_ngram_size") as info:
        llm.generate(USER, temperature=0.7, max_tokens=8, sampling=Sampling(no_repeat_ngram_size=3))
    assert "\n" not in str(info.value) and not fake.bodies


def test_every_sampling_control_reaches_the_embedded_generate_call():
    kwargs: dict = {}
    processors = sampling_kwargs(EVERY.model_copy(update={"no_repeat_ngram_size": 3}), kwargs, sampled=True)
    assert kwargs == {"repetition_penalty": 1.2, "no_repeat_ngram_size": 3, "top_p": 0.9, "top_k": 40, "min_p": 0.05}
    assert len(processors) == 1 and isinstance(processors[0], _OccurrencePenalty)
    greedy: dict = {}
    sampling_kwargs(EVERY, greedy, sampled=False)
    assert greedy == {"repetition_penalty": 1.2}  # truncation only applies when sampling


def test_occurrence_penalty_follows_openai_semantics():
    torch = pytest.importorskip("torch")
    penalty = _OccurrencePenalty(0.5, 0.25, prompt_length=2)
    ids = torch.tensor([[9, 9, 1, 1, 3]])  # prompt 9 9, then 1 twice and 3 once
    scores = penalty(ids, torch.zeros(1, 5))
    assert scores[0].tolist() == [0.0, -1.25, 0.0, -0.75, 0.0]


def test_sampling_is_recorded_with_every_call(tmp_path):
    store = RunStore.create(tmp_path / "r", pipeline="x", config={})
    llm = ScriptedLLM(["a", "b"])
    llm.recorders.append(store.ledger.recorder)
    llm.generate(USER, temperature=0.5, max_tokens=4, sampling=Sampling(repetition_penalty=1.3), role="narrator")
    llm.generate(USER, temperature=0.5, max_tokens=4, role="critic")
    assert [c.sampling for c in store.ledger.llm_calls()] == [{"repetition_penalty": 1.3}, None]
    store.close()


def test_per_role_defaults_come_from_the_pipeline_settings():
    settings = MagnetSettings.parse(MagnetSettings.profile_settings("small"))
    llm = ScriptedLLM(["a", "b"])
    llm.sampling_policy = settings.sampling_for
    llm.generate(USER, temperature=0.35, max_tokens=4, role="narrator")
    llm.generate(USER, temperature=0.1, max_tokens=4, role="critic")
    assert llm.requests[0].sampling == settings.prose_sampling == Sampling(**SMALL_PROSE)
    assert llm.requests[1].sampling == settings.structured_sampling == Sampling(**SMALL_STRUCTURED)


def test_a_looping_structured_reply_is_retried_once_with_a_firmer_penalty():
    looped = '{"name": "' + "la " * 80
    llm = ScriptedLLM(
        [
            (looped, "length"),
            json.dumps(
                {
                    "name": "Ada",
                    "temperament": "sly",
                    "is_villain": False,
                    "possessions": [{"item": "knife", "treasured": False}],
                }
            ),
        ]
    )
    from grammars.demo import CharacterSheet

    reply = llm.generate(
        USER, CharacterSheet, temperature=0.2, max_tokens=40, sampling=Sampling(repetition_penalty=1.1)
    )
    assert reply.parsed.name == "Ada" and len(llm.requests) == 2
    assert llm.requests[1].sampling.repetition_penalty > 1.1


def test_a_caller_with_its_own_fallback_can_decline_the_second_try():
    llm = ScriptedLLM([('{"name": "' + "la " * 80, "length"), '{"name": "never asked"}'])
    from grammars.demo import CharacterSheet

    with pytest.raises(TruncatedOutputError) as cut:
        llm.generate(USER, CharacterSheet, temperature=0.2, max_tokens=40, ask_again_if_looped=False)
    assert cut.value.looped and len(llm.requests) == 1


def test_the_guard_rejects_a_looping_draft_and_names_the_span():
    gate = Gate.for_target(100, 0.1, 3.0)
    llm = ScriptedLLM(
        [
            LOOP,
            "A quiet harbour at dawn. Gulls cried over the water while the keeper walked home, "
            "counting the boats that had not come back from the storm.",
        ]
    )
    drafter = Drafter(llm, gate, 1.3, temperature=0.7, cap=512, use_min=False, role="nst_prose", guard=Guard(0.35, 24))
    seen = []
    outcome = draft_until_gate(
        drafter,
        [{"role": "user", "content": "write"}],
        3,
        on_attempt=lambda n, attempt, feedback: seen.append((attempt, feedback)),
    )
    first, feedback = seen[0]
    assert not first.accepted and first.repeated is not None and first.facts()["repetition"]["rate"] > 0.5
    assert "repeats itself" in feedback and "the gala was about to begin" in feedback
    assert outcome.attempts == 2 and not outcome.degraded and "harbour" in outcome.text
    assert llm.requests[1].messages[-1]["content"] == feedback  # the retry sees the quoted span


def test_trimming_accepts_a_cut_draft_that_fits_once_cut_back():
    text = " ".join(f"Sentence number {i} tells of the harbour." for i in range(12)) + " And then the"
    llm = ScriptedLLM([(text, "length")])
    gate = Gate.for_target(70)
    trimmed = Drafter(llm, gate, 1.3, temperature=0.7, cap=512, use_min=False, role="nst_prose", trim=True)
    attempt = trimmed.attempt([{"role": "user", "content": "write"}])
    assert attempt.accepted and attempt.trimmed and attempt.text.endswith("harbour.")
    assert attempt.facts()["trimmed"] is True
    strict = Drafter(
        ScriptedLLM([(text, "length")]), gate, 1.3, temperature=0.7, cap=512, use_min=False, role="nst_prose"
    )
    assert not strict.attempt([{"role": "user", "content": "write"}]).accepted  # the papers' rule by default
    assert whole_sentences("One. Two") == "One."


def test_with_trimming_the_ceiling_sits_just_over_the_range_so_a_long_draft_is_cut_and_trimmed():
    gate = Gate.for_target(500)  # 400-600
    loose, _ = size_tokens(gate, 1.4, cap=32768, use_min=False)
    tight, floor = size_tokens(gate, 1.4, cap=32768, use_min=True, trim=True)
    assert gate.high * 1.4 < tight < loose and floor < gate.low * 1.4
    llm = ScriptedLLM([("One sentence here. " * 10, "stop")])
    Drafter(llm, gate, 1.4, temperature=0.7, cap=32768, use_min=False, role="nst_prose", trim=True).attempt(
        [{"role": "user", "content": "write"}]
    )
    assert llm.requests[0].max_tokens == tight


def test_trimming_cuts_a_draft_that_ran_past_the_range_back_to_a_sentence_inside_it():
    # 20 sentences of 7 words: 140 words for a 56-84 range, cut at the token limit mid-sentence
    text = " ".join(f"Sentence number {i} tells of the harbour." for i in range(20)) + " And then the"
    gate = Gate.for_target(70)
    attempt = Drafter(
        ScriptedLLM([(text, "length")]), gate, 1.3, temperature=0.7, cap=512, use_min=False, role="nst_prose", trim=True
    ).attempt([{"role": "user", "content": "write"}])
    assert attempt.accepted and attempt.trimmed and attempt.words == 84
    assert attempt.text.endswith("11 tells of the harbour.")
    assert whole_sentences(text, max_words=84).endswith("11 tells of the harbour.")
    assert whole_sentences(text, max_words=5) == ""  # no complete sentence fits
    assert whole_sentences(text).endswith("19 tells of the harbour.")  # without a bound: the last whole one


def test_the_small_profile_is_a_bundle_of_settings_recorded_in_the_run():
    config = NstConfig.parse({"prompt": "x", "words": 600, **NstConfig.profile_settings("small")})
    assert config.profile == "small" and config.trim_cut_drafts
    assert config.prose_sampling == Sampling(**SMALL_PROSE_LONG_PROMPTS)
    assert config.structured_sampling == Sampling(**SMALL_STRUCTURED_LONG_PROMPTS)
    assert config.structured_sampling.repetition_penalty is None  # it would weigh on the chapters in the prompt
    assert config.min_past_events == 1 and NstConfig.parse({"prompt": "x", "words": 600}).min_past_events == 0
    assert config.update_max_tokens == 896 < NstConfig.parse({"prompt": "x", "words": 600}).update_max_tokens
    assert config.failed_update_limit == 1 < NstConfig.parse({"prompt": "x", "words": 600}).failed_update_limit
    assert not config.fallback_full_update and NstConfig.parse({"prompt": "x", "words": 600}).fallback_full_update
    assert NstConfig.parse({"prompt": "x", "words": 600}).prose_sampling == Sampling()  # default: the papers'
    with pytest.raises(ConfigError, match="unknown profile"):
        NstConfig.profile_settings("tiny")
    overridden = NstConfig.parse(
        {"prompt": "x", "words": 600, **NstConfig.profile_settings("small"), "trim_cut_drafts": False}
    )
    assert not overridden.trim_cut_drafts  # each aid is still a setting of its own


def test_the_cli_profile_reaches_the_stored_config_and_show(tmp_path, monkeypatch, capsys):
    from agent import pipelines
    from agent.cli import main
    from agent.testing.story_llm import StoryLLM

    llm = StoryLLM()
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: llm)
    run = tmp_path / "run"
    assert (
        main(
            [
                "write",
                "magnet",
                "agent/magnet/examples/mystery_codicil.toml",
                "--words",
                "150",
                "--profile",
                "small",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    assert "profile small" in capsys.readouterr().err
    with RunStore.open(run, readonly=True) as store:
        assert store.info().config["profile"] == "small"
        calls = store.ledger.llm_calls()
    # the story fits in one paragraph, its closing one: it ends at the story's length (close_at_length)
    assert {c.role: c.sampling for c in calls}["narrator"] == {**SMALL_PROSE, "close_after_words": 150}
    assert main(["show", str(run)]) == 0
    assert "profile small" in capsys.readouterr().out


def test_one_measure_for_eval_and_guards():
    from agent.eval import textmetrics

    assert textmetrics.repeated_ngram_rate is measure.__globals__["repeated_ngram_rate"]
    assert is_looping(LOOP) and not is_looping("A quiet harbour at dawn, gulls crying over the water.")


def test_a_loop_inside_a_word_or_number_counts_as_looping():
    """Seen on the tiny model's critic: a value of "2500000..." and a feedback of "{ 100 } { 100 } ..."
    ran to max_tokens; word n-grams do not see either, the periodic-tail check does (so the
    reply is retried once with a firmer penalty), and a well-formed reply is not flagged."""
    assert is_looping('{"subject": "Ingrid Halvorsen", "value": "25' + "0" * 300)
    assert is_looping('{"verdict": "revise", "feedback": "1000g} { 25 } { 36 }' + " { 100 }" * 60)
    assert not is_looping(
        '{"verdict": "accept", "feedback": "The guard hides the key under the desk and '
        'waits.", "world_updates": [{"subject": "world", "attribute": "alarm_state", '
        '"value": "armed"}], "goal_reached": false, "note": "====="}'
    )


def test_a_counting_loop_counts_as_looping_and_a_reply_with_numbers_does_not():
    """Seen in CI on the tiny model's Magnet actions, four tries running, each cut at its limit and
    never retried with a firmer penalty: the numbers differ, so plain word 4-grams did not repeat."""
    counting = '{ "action": "' + " ".join(f"Ines: * {n}." for n in range(1, 15))
    assert is_looping(counting) and is_looping('{ "action" :"' + " ".join(f"{n}." for n in range(1, 26)))
    assert not is_looping(
        '{"action": "Ines counts the 12 coins on the desk, hides the ledger under 3 loose boards '
        'and waits for Paul, who returns from the dock at 9 with news of Captain Vorn."}'
    )


SALAD = (
    '{ "tool": "update", "upsert_character_state": [{ "name": "Amirayeezah  3.27.2026,Syd$ 2019,Tue$$ '
    "CharangaperserviceAvatarImmutableParisalshipResposalMerdeJaLeJeLaBothSideCasarlineArnaudangeauset"
    "MesTypeLasTeorleansTrueZombieWeaveTheMacheRoachesLavarraciaMatingTwoDroogsStingrayPurpleRedPart"
)
"""The start of a chapter update the tiny model ran to 4,096 tokens (bench_small, small profile)."""


def test_a_run_on_word_counts_as_running_away_and_real_text_does_not():
    from agent.repetition import runs_away

    assert runs_away(SALAD) and is_looping(SALAD)
    compact = json.dumps(
        {
            "tool": "update",
            "upsert_character_state": [
                {"name": "Lucia Ashcombe", "lucia_ashcombe_holding_back_evidence": "true", "location": "the_east_wing"}
            ],
        },
        separators=(",", ":"),
    )
    for text in (
        compact,
        "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz was repealed in 2013.",
        "漁師は言葉を話す魚を釣り上げた。" * 40,
        "A quiet harbour at dawn, gulls crying over the water. " * 3,
    ):
        assert not runs_away(text), text


class _Tokenizer:
    """Decodes token ids into the characters of a fixed text, one character per id."""

    def __init__(self, text: str) -> None:
        self.text = text

    def decode(self, ids, skip_special_tokens=True) -> str:
        return "".join(self.text[i] for i in ids)


def test_the_embedded_backend_stops_a_runaway_structured_reply_at_once():
    """Checked every 32 tokens on the reply's tail: the salad stops within 32 tokens of its
    running away, a well-formed reply of the same length runs on."""
    import torch

    from agent.llm.embedded import RunawayStop

    def first_stop(text: str) -> int | None:
        stop = RunawayStop(_Tokenizer(text), prompt_tokens=10)
        for n in range(11, len(text) + 1):
            if bool(stop(torch.arange(n).unsqueeze(0), None)[0]):
                return n - 10
        return None

    well_formed = (
        '{ "tool": "update", "upsert_character_state": [{ "name": "Tomas", "location": "the harbour", '
        '"mood": "tired but hopeful after the long night at sea" }], "add_past_event": [] }'
    )
    assert first_stop(" " * 10 + well_formed) is None
    salad_start = SALAD.index("Charanga")
    stopped_at = first_stop(" " * 10 + SALAD)
    assert stopped_at is not None and stopped_at <= salad_start + 80 + 32, (stopped_at, salad_start)


def test_each_repetition_limit_rejects_alone():
    """#23: the limits were tested only with a sample that broke both (`or` -> `and` passed)."""
    from agent.repetition import Repetition

    assert Repetition(rate=0.9, span_words=5, span="x").exceeds(0.35, 24)  # the rate alone
    assert Repetition(rate=0.05, span_words=30, span="x").exceeds(0.35, 24)  # the span alone
    assert not Repetition(rate=0.05, span_words=5, span="x").exceeds(0.35, 24)
    assert not Repetition(rate=0.35, span_words=23, span="x").exceeds(0.35, 24)  # both at their edge: kept
    assert Repetition(rate=0.0, span_words=24, span="x").exceeds(0.35, 24)
    rate_only = measure("the cat sat on the mat " * 4 + "and then")  # short repeats: a high rate, a short span
    assert rate_only.rate > 0.35 and rate_only.span_words < 100 and rate_only.exceeds(0.35, 100)
    span_only = measure(" ".join(f"w{i}" for i in range(300)) + " " + " ".join(f"w{i}" for i in range(30)))
    assert span_only.rate < 0.35 and span_only.span_words >= 24 and span_only.exceeds(0.35, 24)
