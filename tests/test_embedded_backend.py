"""The embedded backend on the real tiny model (SmolLM2-135M-Instruct), on both of its engines:
llama.cpp on the GGUF (the default where installed) and transformers + Outlines (the fallback)."""

from __future__ import annotations

import time

import pytest

from agent.llm import Choice, Regex, TruncatedOutputError, UnsupportedSettingError
from agent.llm.constraints import to_constraint
from grammars import all_grammars
from grammars.demo import CharacterSheet, Temperament

pytestmark = pytest.mark.embedded


@pytest.fixture(params=["embedded_llm", "transformers_llm"], ids=["default-engine", "transformers"])
def llm(request):
    return request.getfixturevalue(request.param)


ASK = [
    {"role": "system", "content": "You invent characters and answer in JSON."},
    {
        "role": "user",
        "content": "Invent a character for a pirate story: name, temperament (calm, fiery, sly or "
        "gloomy), whether they are a villain, up to three possessions, and maybe a secret.",
    },
]


def test_nested_schema_is_valid_on_every_sample_at_temperature_0_8(llm):
    sheets = []
    for seed in range(5):
        completion = llm.generate(ASK, CharacterSheet, temperature=0.8, max_tokens=160, seed=seed)
        assert completion.finish_reason == "stop"
        sheet = completion.parsed
        assert isinstance(sheet, CharacterSheet)
        assert CharacterSheet.model_validate_json(completion.text) == sheet  # validated again
        assert isinstance(sheet.temperament, Temperament) and 1 <= len(sheet.possessions) <= 3
        sheets.append(sheet)
    assert len({s.model_dump_json() for s in sheets}) > 1  # sampling really samples


def test_schema_compile_is_paid_once_per_schema(llm):
    constraint = to_constraint(CharacterSheet)
    llm.warm_up(constraint)
    started = time.perf_counter()
    llm.warm_up(to_constraint(CharacterSheet.model_json_schema()))
    assert time.perf_counter() - started < 0.05  # equal schema → the cached index


@pytest.mark.parametrize("name", list(all_grammars()))
def test_every_grammar_compiles_within_vllms_default_budget(llm, name):
    from grammars import get_grammar

    started = time.perf_counter()
    llm.warm_up(to_constraint(get_grammar(name)))
    assert time.perf_counter() - started < 5.0, "vLLM refuses grammars that take > 5 s to compile"


def test_structured_call_cut_at_max_tokens_raises(llm):
    with pytest.raises(TruncatedOutputError, match="max_tokens=6"):
        llm.generate(ASK, CharacterSheet, temperature=0.8, max_tokens=6, seed=1)


def test_regex_and_choice(llm):
    year = llm.generate(
        [{"role": "user", "content": "In which year did the Titanic sink?"}],
        Regex(r"1[0-9]{3}"),
        temperature=0.5,
        max_tokens=8,
        seed=0,
    )
    assert year.parsed.isdigit() and len(year.parsed) == 4
    colour = llm.generate(
        [{"role": "user", "content": "What colour is the sky?"}],
        Choice(["red", "blue", "green"]),
        temperature=0.5,
        max_tokens=4,
        seed=0,
    )
    assert colour.parsed in {"red", "blue", "green"}


def test_sampling_settings_are_honoured(llm):
    story = [{"role": "user", "content": "Tell me a long story about a fox."}]
    a = llm.generate(story, temperature=0.9, max_tokens=20, seed=7)
    b = llm.generate(story, temperature=0.9, max_tokens=20, seed=7)
    assert a.text == b.text  # seed
    assert a.usage.completion_tokens == 20 and a.finish_reason == "length"  # max_tokens
    short = [{"role": "user", "content": "Say only: yes"}]
    forced = llm.generate(short, temperature=0, max_tokens=30, min_tokens=12)
    assert forced.usage.completion_tokens >= 12  # min_tokens
    stopped = llm.generate(story, temperature=0, max_tokens=60, stop=["fox"])
    assert "fox" not in stopped.text and stopped.finish_reason == "stop"  # stop strings
    assert a.usage.prompt_tokens > 10


def test_a_shared_prompt_prefix_is_reused_and_reported(llm):
    """#27: llama.cpp keeps its KV cache between calls, so a conversation that grows (the tool
    loop's) recomputes only what is new, and the ledger's cached tokens say how much was reused;
    transformers recomputes everything and says 0."""
    system = {"role": "system", "content": "You are a careful storyteller. " * 20}
    first = llm.generate([system, {"role": "user", "content": "Name a harbour town."}], temperature=0, max_tokens=12)
    second = llm.generate(
        [
            system,
            {"role": "user", "content": "Name a harbour town."},
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": "Now name its lighthouse."},
        ],
        temperature=0,
        max_tokens=12,
    )
    if llm.engine == "llama.cpp":
        assert first.usage.prompt_tokens <= second.usage.cached_prompt_tokens < second.usage.prompt_tokens
    else:
        assert second.usage.cached_prompt_tokens == 0


def test_min_tokens_with_a_schema_is_refused_loudly(llm):
    with pytest.raises(UnsupportedSettingError):
        llm.generate(ASK, CharacterSheet, temperature=0.5, max_tokens=100, min_tokens=5)


def test_a_runaway_structured_reply_stops_early_and_is_asked_once_more(llm):
    """A constraint that only lets the model write letters, at least 300 of them: its reply runs
    on as one "word". The backend stops it within a check (32 tokens) of 80 letters instead of at
    max_tokens=400, the LLM layer asks once more with a firmer penalty, and both calls are short."""
    calls = []
    llm.recorders.append(calls.append)
    try:
        with pytest.raises(TruncatedOutputError, match="repeated itself") as error:
            llm.generate(
                [{"role": "user", "content": "Write one very long word."}],
                Regex(r"[a-z]{300,2000}"),
                temperature=0.7,
                max_tokens=400,
                seed=0,
            )
    finally:
        llm.recorders.remove(calls.append)
    assert error.value.looped
    assert len(calls) == 2 and all(c.completion_tokens <= 96 for c in calls), [c.completion_tokens for c in calls]
