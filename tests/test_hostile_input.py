"""The standing hostile suite (#14): property-based inputs and bad files never give a traceback,
a hang or a wrong success; each gives one ``fabula: error:`` line and a non-zero exit."""

from __future__ import annotations

import math
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cli import main
from agent.magnet.definition import DefinitionError, parse_definition
from agent.store import RunStore
from agent.store.search import MAX_TERMS, query_terms

STORY = "agent/magnet/examples/mystery_codicil.toml"
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def one_error(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code in (1, 2) and err and err[-1].startswith("fabula: error: ") and "Traceback" not in "\n".join(err), err
    return err[-1]


@pytest.mark.parametrize("argv", [
    ["write", "nst", "--prompt-file", "/dev/zero", "--words", "1000"],
    ["write", "magnet", "/dev/zero"],
    ["prompt", "hi", "--schema", "/dev/zero"],
    ["write", "magnet", STORY, "--pages", "inf"],
    ["write", "magnet", STORY, "--pages", "nan"],
    ["write", "magnet", STORY, "--pages", "1e300"],
    ["write", "magnet", STORY, "--words", "9223372036854775807"],
])
def test_endless_files_and_absurd_numbers_are_one_line(argv, tmp_path, capsys):
    code = main([*argv, "--out", str(tmp_path / "run")] if argv[0] == "write" else argv)
    one_error(capsys, code)
    assert not (tmp_path / "run").exists()


@FAST
@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)),
       st.sampled_from(["words", "pages", "page_words"]))
def test_story_length_fields_accept_only_sane_values(value, key):
    data = {"title": "T", "genre": "g", "goal": "x", key: value,
            "characters": [{"name": "A", "role": "r", "description": "d", "personality": "p", "goals": "g",
                            "location": "l"}]}
    if key == "page_words":
        data["pages"] = 2
    try:
        story = parse_definition(data, "s.toml")
    except DefinitionError as exc:
        assert str(exc).startswith("s.toml: ") and "\n" not in str(exc)
        return
    assert 0 < story.target_words <= 300_000 * (5_000 if key == "page_words" else 1)
    assert isinstance(value, int) or math.isfinite(value)


@FAST
@given(st.text(alphabet=string.printable + "\x00\"*()-:^éø中文", max_size=300))
def test_any_query_is_answered_as_literal_terms(store_with_text, query):
    hits = store_with_text.search(query, k=5)
    assert len(hits) <= 5
    assert len(query_terms(query)) <= MAX_TERMS


@pytest.fixture
def store_with_text(tmp_path_factory):
    store = RunStore.create(tmp_path_factory.mktemp("s") / "run", pipeline="nst", config={})
    store.commit_chapter(1, "One", 'The keeper lit the "lamp". Waves broke (twice) on the rocks: AND OR NOT near.',
                         state={})
    yield store
    store.close()


@FAST
@given(k=st.integers(min_value=-(10**20), max_value=10**20), before=st.integers(min_value=-(10**20),
                                                                              max_value=10**20))
def test_search_numbers_are_bounded_in_one_line(tmp_path_factory, k, before):
    import contextlib
    import io

    run = tmp_path_factory.mktemp("q") / "run"
    with RunStore.create(run, pipeline="nst", config={}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["search", str(run), "lamp", "-k", str(k), "--before", str(before)])
    lines = err.getvalue().strip().splitlines()
    if 1 <= k <= 1000 and 1 <= before <= 1_000_000:
        assert code == 0
    else:
        assert code == 2 and len(lines) == 1 and lines[0].startswith("fabula: error: ")


def test_a_nul_in_a_chapter_does_not_cut_search_windows(tmp_path):
    with RunStore.create(tmp_path / "run", pipeline="nst", config={}) as store:
        store.commit_chapter(1, "One", "The lamp\x00 was lit. The keeper slept by the lamp.", state={})
        hits = store.search("keeper", k=3)
        text = store.chapter(1).text
    assert "\x00" not in text and len(text) == len("The lamp\x00 was lit. The keeper slept by the lamp.")
    assert hits and "The keeper slept by the lamp." in hits[0].text


def test_a_long_query_says_only_the_first_terms_are_searched(tmp_path, capsys):
    with RunStore.create(tmp_path / "run", pipeline="nst", config={}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    query = " ".join(f"word{i}" for i in range(100)) + " lamp"
    assert main(["search", str(tmp_path / "run"), query]) == 0
    assert f"only the first {MAX_TERMS} are searched" in capsys.readouterr().err
