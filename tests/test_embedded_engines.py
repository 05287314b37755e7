"""#27: the embedded backend's engines. llama.cpp on a GGUF in process (the default where it is
installed), transformers as the fallback, any local GGUF through ``--model``; a file that is not
a model refused in one line; prefix reuse across interleaved conversations; a decode interrupted
by Ctrl-C leaves the engine as if the call never happened."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from agent.cli import main
from agent.llm import LLMError
from agent.llm import embedded_engines as engines
from agent.llm.embedded_llamacpp import llamacpp_available
from tests.interrupts import FIRM, FOX, ctrl_c_at_token

needs_llamacpp = pytest.mark.skipif(
    not llamacpp_available(), reason="llama-cpp-python is not installed (scripts/setup builds it)"
)


def _gguf_header(keys: dict[str, str]) -> bytes:
    """A GGUF header with string metadata and no tensors."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(keys))
    for key, value in keys.items():
        out += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", 8)
        out += struct.pack("<Q", len(value.encode())) + value.encode()
    return out


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "ends inside its header"),
        (b"PK\x03\x04 not a model at all" * 10, "not a GGUF file"),
        (b"GGUF\x03\x00\x00\x00", "truncated"),
        (_gguf_header({"general.architecture": "llama"}), "has no chat template"),
    ],
)
def test_a_file_that_is_not_a_chat_model_is_refused_in_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    assert main(["prompt", "hello", "--model", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_the_engine_setting_is_checked_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("FABULA_EMBEDDED_ENGINE", "vulkan")
    assert main(["prompt", "hello"]) == 2
    err = capsys.readouterr().err.strip()
    assert "FABULA_EMBEDDED_ENGINE" in err and "auto, llama.cpp, transformers" in err and len(err.splitlines()) == 1


def test_without_llama_cpp_the_default_runs_on_transformers_and_says_so_once(monkeypatch, capsys):
    opened = []
    monkeypatch.setattr(engines, "llamacpp_available", lambda: False)
    monkeypatch.setattr(engines, "_transformers", lambda model, thinking: opened.append(model) or "transformers")
    monkeypatch.setattr(engines, "_noticed", False)
    assert engines.open_embedded() == "transformers" and engines.open_embedded() == "transformers"
    assert opened == [None, None]
    assert capsys.readouterr().err.count("runs on transformers") == 1


def test_engine_choice_follows_the_model_and_the_setting(monkeypatch, tmp_path):
    picked = []
    monkeypatch.setattr(engines, "_transformers", lambda model, thinking: picked.append(("transformers", model)))
    monkeypatch.setattr(engines, "_llamacpp", lambda gguf, folder, thinking: picked.append(("llama.cpp", gguf)))
    monkeypatch.setattr(engines, "llamacpp_available", lambda: True)
    engines.open_embedded(str(tmp_path / "m.gguf"))
    engines.open_embedded(str(tmp_path / "hf-folder"))
    engines.open_embedded(None, engine="transformers")
    assert picked == [
        ("llama.cpp", tmp_path / "m.gguf"),
        ("transformers", str(tmp_path / "hf-folder")),
        ("transformers", None),
    ]
    with pytest.raises(LLMError, match="cannot load a GGUF"):
        engines.open_embedded(str(tmp_path / "m.gguf"), engine="transformers")
    with pytest.raises(LLMError, match=r"loads a \.gguf file"):
        engines.open_embedded(str(tmp_path / "hf-folder"), engine="llama.cpp")


@pytest.fixture(scope="module")
def gguf_llm():
    """The embedded model's GGUF opened as any local GGUF: its own template and tokenizer."""
    if not llamacpp_available():
        pytest.skip("llama-cpp-python is not installed (scripts/setup builds it)")
    from agent.weights.models import ensure_gguf

    llm = engines.open_embedded(str(ensure_gguf()))
    yield llm
    llm.close()


@needs_llamacpp
@pytest.mark.embedded
def test_a_gguf_renders_its_own_template_as_transformers_does(gguf_llm, embedded_llm):
    """``--model x.gguf`` reads the chat template stored in the file: token for token the prompt
    the HF tokenizer makes for the same conversation, so budgets count what is decoded."""
    conversation = [
        {"role": "system", "content": "You keep a lighthouse."},
        {"role": "user", "content": 'Héllo — “quotes”, {"json": [1, 2]}\n\nA new paragraph.'},
        {"role": "assistant", "content": "Good evening."},
        {"role": "user", "content": "Go on."},
    ]
    assert gguf_llm.template.ids(conversation) == embedded_llm.template.ids(conversation)
    assert gguf_llm.context_length is None and gguf_llm.model_context == 8192
    reply = gguf_llm.generate(
        [{"role": "user", "content": "Invent a pirate."}],
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 20},
                "age": {"type": "integer", "minimum": 18, "maximum": 80},
            },
            "required": ["name", "age"],
        },
        temperature=1.0,
        max_tokens=80,
        seed=3,
    )
    assert 18 <= reply.parsed["age"] <= 80


@needs_llamacpp
def test_fabula_models_lists_the_gguf_files_it_finds(tmp_path, monkeypatch, capsys):
    from agent.weights.models import ensure_gguf

    (tmp_path / "models" / "qwen").mkdir(parents=True)
    (tmp_path / "models" / "qwen" / "tiny.gguf").symlink_to(ensure_gguf())
    (tmp_path / "models" / "broken.gguf").write_bytes(b"not a model")
    monkeypatch.chdir(tmp_path)
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "llama 135M ctx 8192" in out
    assert "broken.gguf  [cannot be loaded: broken.gguf is not a GGUF file" in out


@needs_llamacpp
@pytest.mark.embedded
def test_interleaved_conversations_each_reuse_their_own_prefix(embedded_llm):
    """Two conversations in turn (NstAgent's tool loop and its prose call; Magnet's roles): each
    call finds its own earlier cache among the saved ones, recomputes only the last token, and
    answers exactly as it did the first time."""
    if embedded_llm.engine != "llama.cpp":
        pytest.skip("the default engine is transformers here")
    a = [
        {"role": "system", "content": "Conversation A. " + "The harbour wall is old. " * 70},
        {"role": "user", "content": "Go on."},
    ]
    b = [
        {"role": "system", "content": "Conversation B. " + "The lighthouse is tall. " * 70},
        {"role": "user", "content": "Go on."},
    ]
    c = [
        {"role": "system", "content": "Conversation C. " + "The boats are blue. " * 70},
        {"role": "user", "content": "Go on."},
    ]
    first = {
        name: embedded_llm.generate(conv, temperature=0, max_tokens=6) for name, conv in (("a", a), ("b", b), ("c", c))
    }
    for name, conv in (("b", b), ("a", a), ("c", c)):  # b sits behind a among the saved caches
        again = embedded_llm.generate(conv, temperature=0, max_tokens=6)
        assert again.usage.cached_prompt_tokens == again.usage.prompt_tokens - 1, name
        assert again.text == first[name].text


@needs_llamacpp
@pytest.mark.embedded
def test_each_call_says_where_its_time_went(embedded_llm):
    """#35: compile on a schema's first use only, prefill of what the cache lacked, one decode step
    per generated token; the parts never add up to more than the call took."""
    if embedded_llm.engine != "llama.cpp":
        pytest.skip("the default engine is transformers here")
    schema = {
        "type": "object",
        "properties": {"harbour": {"type": "string", "maxLength": 40}},
        "required": ["harbour"],
        "additionalProperties": False,
        "title": "TimedHarbour",
    }
    story = [
        {"role": "system", "content": "The harbour wall is old. " * 60},
        {"role": "user", "content": "Describe the harbour in JSON."},
    ]
    seen = []
    embedded_llm.recorders.append(seen.append)
    try:
        first = embedded_llm.generate(story, schema, temperature=0, max_tokens=40)
        again = embedded_llm.generate(story, schema, temperature=0, max_tokens=40)
    finally:
        embedded_llm.recorders.remove(seen.append)
    assert first.usage.cached_prompt_tokens < again.usage.cached_prompt_tokens == again.usage.prompt_tokens - 1
    one, two = (record.timing for record in seen)
    assert one is not None and two is not None
    assert one.compile > 10 * two.compile and one.prefill > 5 * two.prefill  # compiled once, prefix reused
    assert one.decode > 0 and two.decode > 0 and one.mask > 0 and one.sample > 0
    for record in seen:
        assert record.timing.total <= record.latency_s


@needs_llamacpp
@pytest.mark.embedded
def test_ctrl_c_inside_a_decode_leaves_the_engine_as_before(embedded_llm, monkeypatch):
    if embedded_llm.engine != "llama.cpp":
        pytest.skip("the default engine is transformers here")
    expected = embedded_llm.generate(FOX, temperature=0, max_tokens=24, sampling=FIRM).text
    with ctrl_c_at_token(monkeypatch, 5):
        embedded_llm.generate(FOX, temperature=0, max_tokens=24, sampling=FIRM)
    assert embedded_llm.generate(FOX, temperature=0, max_tokens=24, sampling=FIRM).text == expected


def test_the_gguf_header_reader_skips_arrays_and_reads_the_context(tmp_path):
    from agent.weights.gguf_header import gguf_info

    header = _gguf_header({"general.architecture": "qwen3", "tokenizer.chat_template": "{{ messages }}"})
    header = header[:16] + struct.pack("<Q", 4) + header[24:]  # two more keys
    header += struct.pack("<Q", 20) + b"qwen3.context_length" + struct.pack("<I", 4) + struct.pack("<I", 40960)
    header += struct.pack("<Q", 16) + b"tokenizer.tokens" + struct.pack("<IIQ", 9, 8, 2)
    header += struct.pack("<Q", 1) + b"a" + struct.pack("<Q", 1) + b"b"
    path = tmp_path / "q.gguf"
    path.write_bytes(header)
    info = gguf_info(Path(path))
    assert (info.architecture, info.context_length, info.has_chat_template) == ("qwen3", 40960, True)


@needs_llamacpp
@pytest.mark.embedded
def test_bounds_enums_and_nesting_hold_on_every_sample_at_temperature_1(embedded_llm):
    """#27 'outputs unchanged in kind': 20 samples at temperature 1.0 under one schema with integer
    bounds, an enum and nested objects, all valid on the default engine (as the any-server work
    measured for servers)."""
    from agent.llm import Request

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "mood": {"enum": ["calm", "fiery", "sly", "gloomy"]},
            "age": {"type": "integer", "minimum": 16, "maximum": 90},
            "ship": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 24},
                    "guns": {"type": "integer", "minimum": 0, "maximum": 64},
                },
                "required": ["name", "guns"],
            },
        },
        "required": ["name", "mood", "age", "ship"],
    }
    ask = [{"role": "user", "content": "Invent a pirate captain and the ship she sails, as JSON."}]
    results = embedded_llm.generate_many(
        [Request(ask, schema, temperature=1.0, max_tokens=120, seed=s) for s in range(20)], return_exceptions=True
    )
    failed = [r for r in results if isinstance(r, Exception)]
    assert not failed, failed
    assert len({r.text for r in results}) > 10  # really sampled
    for r in results:
        value = r.parsed
        assert value["mood"] in {"calm", "fiery", "sly", "gloomy"} and 16 <= value["age"] <= 90
        assert 0 <= value["ship"]["guns"] <= 64 and len(value["name"]) <= 24
