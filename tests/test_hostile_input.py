"""The standing hostile suite (#14): property-based inputs and bad files never give a traceback,
a hang or a wrong success; each gives one ``fabula: error:`` line and a non-zero exit."""

from __future__ import annotations

import json
import math
import string
from pathlib import Path

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


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "nst", "--prompt-file", "/dev/zero", "--words", "1000"],
        ["write", "magnet", "/dev/zero"],
        ["prompt", "hi", "--schema", "/dev/zero"],
        ["write", "magnet", STORY, "--pages", "inf"],
        ["write", "magnet", STORY, "--pages", "nan"],
        ["write", "magnet", STORY, "--pages", "1e300"],
        ["write", "magnet", STORY, "--words", "9223372036854775807"],
    ],
)
def test_endless_files_and_absurd_numbers_are_one_line(argv, tmp_path, capsys):
    code = main([*argv, "--out", str(tmp_path / "run")] if argv[0] == "write" else argv)
    one_error(capsys, code)
    assert not (tmp_path / "run").exists()


@FAST
@given(
    st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)),
    st.sampled_from(["words", "pages", "page_words"]),
)
def test_story_length_fields_accept_only_sane_values(value, key):
    data = {
        "title": "T",
        "genre": "g",
        "goal": "x",
        key: value,
        "characters": [
            {"name": "A", "role": "r", "description": "d", "personality": "p", "goals": "g", "location": "l"}
        ],
    }
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
@given(st.text(alphabet=string.printable + '\x00"*()-:^éø中文', max_size=300))
def test_any_query_is_answered_as_literal_terms(store_with_text, query):
    hits = store_with_text.search(query, k=5)
    assert len(hits) <= 5
    assert len(query_terms(query)) <= MAX_TERMS


@pytest.fixture
def store_with_text(tmp_path_factory):
    store = RunStore.create(tmp_path_factory.mktemp("s") / "run", pipeline="nst", config={})
    store.commit_chapter(
        1, "One", 'The keeper lit the "lamp". Waves broke (twice) on the rocks: AND OR NOT near.', state={}
    )
    yield store
    store.close()


@FAST
@given(k=st.integers(min_value=-(10**20), max_value=10**20), before=st.integers(min_value=-(10**20), max_value=10**20))
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


# -- #23 round two ------------------------------------------------------------------------------
def usage_error(capsys, code) -> str:
    """A refusal in one line: fabula's own (``fabula: error:``) or argparse's for a bad flag value
    (``fabula CMD: error: argument ...``, exit 2, after the usage line)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert code in (1, 2) and err and "Traceback" not in "\n".join(err) and "internal error" not in "\n".join(err), err
    assert err[-1].startswith("fabula: error: ") or (code == 2 and ": error: argument " in err[-1]), err
    return err[-1]


def run_cli(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse refuses a flag's value
        return int(exc.code or 0)


DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
DEEP_JSONL = "[" * 100_000 + "]" * 100_000 + "\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["story", "check", "{toml}"],
        ["write", "magnet", "{toml}", "--out", "{tmp}/run"],
        ["write", "nst", "--prompts", "{jsonl}", "--id", "1", "--words", "1000", "--out", "{tmp}/run"],
        ["batch", "--pipeline", "nst", "--prompts", "{jsonl}", "--words", "1000", "--out", "{tmp}/run"],
    ],
)
def test_input_nested_too_deeply_is_one_line(argv, tmp_path, capsys):
    (tmp_path / "deep.toml").write_text(DEEP_TOML)
    (tmp_path / "deep.jsonl").write_text(DEEP_JSONL)
    argv = [a.format(toml=tmp_path / "deep.toml", jsonl=tmp_path / "deep.jsonl", tmp=tmp_path) for a in argv]
    assert "nested too deeply" in one_error(capsys, run_cli(argv))
    assert not (tmp_path / "run").exists()


def _unusable_dirs(tmp_path):
    (tmp_path / "file").write_text("x")
    return {
        "under a file": str(tmp_path / "file" / "run"),
        "a file": str(tmp_path / "file"),
        "under /proc": "/proc/fabula-run",
        "a 300-char name": str(tmp_path / ("a" * 300)),
        "/dev/null": "/dev/null",
    }


@pytest.mark.parametrize("where", ["under a file", "a file", "under /proc", "a 300-char name", "/dev/null"])
@pytest.mark.parametrize(
    "command", ["write nst", "write magnet", "batch", "grammars export", "eval report", "eval inject", "fork"]
)
def test_every_command_that_writes_a_folder_refuses_an_unusable_one_in_one_line(
    command, where, tmp_path, capsys, request
):
    """One output-folder check (agent.cli.checks.output_dir) at every door that writes a folder:
    before any model is asked, one line, nothing made."""
    from agent.testing.hostile import HostileServer

    server = HostileServer("ok")  # a server that answers: the folder, not the server, must stop the command
    request.addfinalizer(server.close)
    out = _unusable_dirs(tmp_path)[where]
    run = tmp_path / "src"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    argv = {
        "write nst": ["write", "nst", "--prompt", "x", "--words", "1000", "--out", out, "--endpoint", server.url],
        "write magnet": ["write", "magnet", STORY, "--out", out, "--endpoint", server.url],
        "batch": [
            "batch",
            "--pipeline",
            "magnet",
            "--stories",
            "agent/magnet/examples",
            "--out",
            out,
            "--endpoint",
            server.url,
        ],
        "grammars export": ["grammars", "export", out],
        "eval report": ["eval", "report", str(run), "--out", out],
        "eval inject": ["eval", "inject", str(run), "--out", out, "--no-judge"],
        "fork": ["fork", str(run), "--at", "1", "--out", out, "--no-run"],
    }[command]
    line = usage_error(capsys, run_cli(argv))
    assert server.posted() == [] and not (tmp_path / "file" / "run").exists()
    if where == "under /proc":  # found by the write probe, before any work: not when the folder is made
        assert "cannot write in /proc" in line, line


@pytest.mark.parametrize(
    "argv",
    [
        ["prompt", "hi", "--temperature", "nan", "--endpoint", "{url}"],
        ["prompt", "hi", "--temperature", "inf", "--endpoint", "{url}"],
        ["view", "{run}", "--poll", "nan"],
        ["view", "{run}", "--poll", "inf"],
        ["view", "{run}", "--poll", "-1"],
        ["watch", "{run}", "--interval", "nan"],
        ["watch", "{run}", "--interval", "inf"],
        ["watch", "{run}", "--interval", "0"],
        ["eval", "compare", "{run}", "--vs", "{run}", "--resamples", "1000000000000"],
        ["eval", "inject", "{run}", "--out", "{tmp}/x", "--controls", "-1", "--no-judge"],
        ["write", "magnet", STORY, "--pages", "0.0001", "--endpoint", "{url}", "--out", "{tmp}/m"],
        ["view", "{run}", "--host", "999.1.1.1"],
    ],
)
def test_numbers_and_addresses_are_checked_at_every_door(argv, capsys, monkeypatch, tmp_path, request):
    """One finite-number type (agent.cli.checks) for every float flag: nan, inf and out-of-range
    values are refused at parse time, before a server, a web server or a run is touched."""
    import uvicorn

    from agent.testing.hostile import HostileServer

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the web server was started"))
    server = HostileServer("ok")
    request.addfinalizer(server.close)
    with RunStore.create(tmp_path / "run", pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp. " * 40, state={})
        store.finish()
    usage_error(capsys, run_cli([a.format(url=server.url, run=tmp_path / "run", tmp=tmp_path) for a in argv]))
    assert server.posted() == [] and not (tmp_path / "x").exists() and not (tmp_path / "m").exists()


def test_a_config_column_that_is_not_json_is_one_line_in_every_command(tmp_path, capsys):
    import sqlite3

    run = tmp_path / "run"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    with sqlite3.connect(run / "run.db") as conn:
        conn.execute("UPDATE run SET config = '{not json'")
    for argv in (
        ["show", str(run)],
        ["export", str(run)],
        ["search", str(run), "lamp"],
        ["resume", str(run)],
        ["eval", "metrics", str(run)],
        ["fork", str(run), "--at", "1", "--out", str(tmp_path / "f")],
    ):
        assert "damaged" in one_error(capsys, run_cli(argv)), argv


def test_binary_chapter_text_is_reported_as_damage_by_export_search_metrics_and_show(tmp_path, capsys):
    import sqlite3

    run = tmp_path / "run"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    with sqlite3.connect(run / "run.db") as conn:
        conn.execute("UPDATE chapters SET text = ?", (b"\xff\xfe\x00The lamp, binary",))
    for argv in (["export", str(run)], ["search", str(run), "lamp"], ["eval", "metrics", str(run)], ["show", str(run)]):
        assert "damaged" in one_error(capsys, run_cli(argv)), argv  # #39: never mojibake with exit 0


# -- #23: hangs and unbounded work ---------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        ["--replicas", "0"],
        ["--replicas", "-1"],
        ["--tensor-parallel-size", "0"],
        ["--dtype", "bogus"],
        ["--log-file", "{tmp}"],
        ["--served-name", ""],
        ["--model", "/nonexistent/model"],
        ["--", "--host", "0.0.0.0"],
    ],
)
def test_serve_dry_run_validates_every_option_before_preparing_the_model(extra, tmp_path, capsys, monkeypatch):
    from agent.weights import models

    monkeypatch.setattr(models, "ensure_embedded_model", lambda **k: pytest.fail("the model was prepared first"))
    one_error(capsys, run_cli(["serve", "--dry-run", *[a.format(tmp=tmp_path) for a in extra]]))


def test_serve_dry_run_prepares_nothing(capsys, monkeypatch):
    from agent.weights import models

    monkeypatch.setattr(models, "ensure_embedded_model", lambda **k: pytest.fail("a dry run prepared the model"))
    assert run_cli(["serve", "--dry-run"]) == 0
    assert str(models.embedded_model_dir()) in capsys.readouterr().out


def test_edit_file_from_an_endless_device_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    assert "fabula reads at most" in one_error(
        capsys, run_cli(["edit", str(run), "--chapter", "1", "--file", "/dev/zero", "--no-rederive"])
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "nst", "--prompt-file", "{fifo}", "--words", "1000", "--out", "{tmp}/r"],
        ["story", "check", "{fifo}"],
        ["edit", "{tmp}/run", "--chapter", "1", "--file", "{fifo}", "--no-rederive"],
    ],
)
def test_a_fifo_nobody_writes_to_does_not_block(argv, tmp_path):
    """open() of a FIFO without a writer blocks forever; fabula's capped reader opens it without
    blocking and reads it as empty."""
    import os
    import subprocess
    import sys

    os.mkfifo(tmp_path / "fifo")
    with RunStore.create(tmp_path / "run", pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    argv = [a.format(fifo=tmp_path / "fifo", tmp=tmp_path) for a in argv]
    try:
        result = subprocess.run(
            [sys.executable, "-m", "agent.cli", *argv],
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, "FABULA_HOME": str(tmp_path / "home")},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv[0]} blocked on a FIFO with no writer")
    lines = result.stderr.strip().splitlines()
    assert result.returncode in (1, 2) and lines and lines[-1].startswith("fabula: error: "), result.stderr


def test_a_pipe_with_a_writer_is_still_read(tmp_path, capsys):
    import os
    import threading

    os.mkfifo(tmp_path / "fifo")
    writer = threading.Thread(target=lambda: (tmp_path / "fifo").write_text('title = "T"\n'), daemon=True)
    writer.start()
    code = run_cli(["story", "check", str(tmp_path / "fifo")])
    writer.join(5)
    assert code == 2 and "genre" in capsys.readouterr().err  # read whole: its problems are the file's


# -- #23: edit refuses what it would ignore ------------------------------------------------------
@pytest.fixture(scope="module")
def step_run(tmp_path_factory):
    from agent import pipelines
    from agent.magnet import runner
    from agent.magnet.settings import MagnetSettings
    from agent.testing.story_llm import StoryLLM
    from tests.magnet.stories import story

    run = tmp_path_factory.mktemp("edit") / "m"
    original = pipelines.LLMOptions.open
    pipelines.LLMOptions.open = lambda self, store=None: StoryLLM()  # type: ignore[method-assign]
    try:
        config = {**MagnetSettings().as_config(), "story": story(words=200).to_dict()}
        pipelines.start(run, runner.NAME, config, pipelines.LLMOptions(backend="scripted")).close()
    finally:
        pipelines.LLMOptions.open = original  # type: ignore[method-assign]
    return run


@pytest.mark.parametrize(
    "argv",
    [
        ["--step", "1", "--var", "bogus.key=1"],
        ["--step", "1", "--var", "world.nonexistent_var=1"],
        ["--step", "1", "--var", "goals=[]"],
        ["--step", "1", "--var", 'x={"a":'],
        ["--step", "1", "--title", "T"],
    ],
)
def test_edit_step_refuses_unknown_variables_broken_json_and_chapter_flags(step_run, argv, capsys):
    from agent.store import RunStore as Store

    with Store.open(step_run, readonly=True) as store:
        before = json.dumps(store.state(1), sort_keys=True)
    one_error(capsys, run_cli(["edit", str(step_run), *argv]))
    with Store.open(step_run, readonly=True) as store:
        assert json.dumps(store.state(1), sort_keys=True) == before


@pytest.mark.parametrize("argv", [["--var", "world.x=1"], ["--title", ""], ["--title", "   "], ["--title", "a\x1bb"]])
def test_edit_chapter_refuses_step_flags_and_empty_titles(argv, tmp_path, capsys):
    (tmp_path / "new.md").write_text("The keeper lit two lamps.")
    run = tmp_path / "run"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    one_error(
        capsys,
        run_cli(["edit", str(run), "--chapter", "1", "--file", str(tmp_path / "new.md"), "--no-rederive", *argv]),
    )
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(1).version == 1 and store.chapter(1).title == "One"


# -- #23: wrong successes --------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["5", "0", "-3", "499", "300001", "1e9", "true", '"600"', "[600]"])
@pytest.mark.parametrize("door", ["write", "resume", "fork"])
def test_words_given_by_set_pass_the_same_range_as_words(door, value, tmp_path, capsys):
    """`--set words=5` went around the range `--words` enforces: every door that takes --set now
    checks it (agent.settings.USER_LIMITS, read by parse_assignments)."""
    from agent.testing.hostile import HostileServer

    server = HostileServer("ok")
    try:
        run = tmp_path / "run"
        if door == "write":
            argv = [
                "write",
                "nst",
                "--prompt",
                "x",
                "--words",
                "1000",
                "--set",
                f"words={value}",
                "--out",
                str(run),
                "--endpoint",
                server.url,
            ]
        else:
            with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
                store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
            argv = (
                ["resume", str(run), "--force"]
                if door == "resume"
                else ["fork", str(run), "--at", "1", "--out", str(tmp_path / "f"), "--no-run"]
            )
            argv += ["--set", f"words={value}", "--endpoint", server.url]
        assert "words" in one_error(capsys, run_cli(argv))
        assert server.posted() == [] and not (tmp_path / "f").exists()
    finally:
        server.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["--pipeline", "nst", "--prompts", "{p}", "--words", "1000", "--set", "words=700"],
        ["--pipeline", "nst", "--prompts", "{p}", "--words", "1000", "--set", "prompt=x"],
        ["--pipeline", "magnet", "--stories", "agent/magnet/examples", "--set", "story={{}}"],
    ],
)
def test_a_batch_refuses_settings_it_would_silently_replace(argv, tmp_path, capsys, request):
    from agent.testing.hostile import HostileServer

    server = HostileServer("ok")
    request.addfinalizer(server.close)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "a bell"}\n')
    one_error(
        capsys,
        run_cli(
            ["batch", *[a.format(p=prompts) for a in argv], "--out", str(tmp_path / "b"), "--endpoint", server.url]
        ),
    )
    assert not (tmp_path / "b").exists() and server.posted() == []


@pytest.mark.parametrize("value", ["{}", "[]", '{"characters": []}', '{"characters": [{"x": 1}]}'])
def test_set_story_is_a_story_definition_or_refused(value, tmp_path, capsys):
    from agent import pipelines
    from agent.errors import ConfigError
    from agent.magnet.settings import MagnetSettings

    one_error(
        capsys,
        run_cli(
            [
                "write",
                "magnet",
                STORY,
                "--set",
                f"story={value}",
                "--out",
                str(tmp_path / "r"),
                "--endpoint",
                "http://127.0.0.1:9/v1",
            ]
        ),
    )
    with pytest.raises(ConfigError, match="story"):  # resume and fork --set validate through the type
        pipelines.get("magnet").configure(
            {**MagnetSettings().as_config(), "story": json.loads(value)}, pipelines.LLMOptions()
        )


def test_resume_of_a_completed_run_checks_set_and_says_it_changes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
        store.finish()
    assert "read_budgett" in one_error(capsys, run_cli(["resume", str(run), "--set", "read_budgett=2"]))
    assert "fabula fork" in one_error(capsys, run_cli(["resume", str(run), "--set", "read_budget=2"]))
    assert run_cli(["resume", str(run)]) == 0


@pytest.mark.parametrize("inside", [".", "sub", "sub/deeper"])
def test_a_fork_inside_the_run_it_copies_is_refused(inside, tmp_path, capsys):
    run = tmp_path / "run"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    assert "outside the run" in one_error(
        capsys, run_cli(["fork", str(run), "--at", "1", "--out", str(run / inside), "--no-run"])
    )
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == []


@pytest.mark.parametrize(
    "lines, problem",
    [
        (['{"id": 1, "prompt": "a"}', '{"id": 1, "prompt": "b"}'], "appears twice"),
        (['{"id": 1, "prompt": "a"}', '{"id": "1", "prompt": "b"}'], "appears twice"),
        (['{"id": [1], "prompt": "a"}'], "string or an integer"),
        (['{"id": true, "prompt": "a"}'], "string or an integer"),
        (['{"id": {"a": 1}, "prompt": "a"}'], "string or an integer"),
        (['{"id": 1, "prompt": "a"}', '{"id": 2, "prompt": "b"'], "not a JSON object"),
        (['{"id": 1, "prompt": "a"}', '{"id": "", "prompt": "b"}'], "printable"),
        (['{"id": 1, "prompt": "a"}', '{"id": 2}'], "needs an id and a prompt"),
    ],
)
@pytest.mark.parametrize("command", ["write", "batch"])
def test_a_prompt_set_is_read_and_validated_whole_the_same_way_by_write_and_batch(
    command, lines, problem, tmp_path, capsys
):
    """`write nst --prompts F --id 1` stopped at the first match; both commands now read the set
    through agent.prompt_set: a broken line after the wanted one, duplicate ids (1 and "1" too) and
    ids that are lists or booleans are refused the same way."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(lines) + "\n")
    argv = (
        ["write", "nst", "--prompts", str(prompts), "--id", "1", "--words", "1000"]
        if command == "write"
        else ["batch", "--pipeline", "nst", "--prompts", str(prompts), "--words", "1000"]
    )
    assert problem in one_error(
        capsys, run_cli([*argv, "--out", str(tmp_path / "r"), "--endpoint", "http://127.0.0.1:9/v1"])
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "name, problem",
    [("Ann\x07Lee", "control characters"), ("A" * 100_000, "at most 80"), ("Ann\x1b[31mLee", "control characters")],
)
def test_story_check_refuses_names_that_are_not_names(name, problem, tmp_path, capsys):
    import tomllib

    data = tomllib.loads(Path(STORY).read_text(encoding="utf-8"))
    data["characters"][0]["name"] = name
    path = tmp_path / "s.toml"
    path.write_text(_toml(data))
    code = run_cli(["story", "check", str(path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and all(line.startswith("fabula: error: ") and len(line) < 600 for line in lines), lines
    assert any(problem in line and "characters[0].name" in line for line in lines), lines


def test_story_check_refuses_thousands_of_characters(tmp_path, capsys):
    import tomllib

    data = tomllib.loads(Path(STORY).read_text(encoding="utf-8"))
    data["characters"] = [
        {"name": f"P{i}", "role": "r", "description": "d", "personality": "p", "goals": "g", "location": "l"}
        for i in range(5000)
    ]
    data.pop("focal", None)
    path = tmp_path / "s.toml"
    path.write_text(_toml(data))
    assert "at most 64" in one_error(capsys, run_cli(["story", "check", str(path)]))


def _toml(data) -> str:
    """A small TOML writer for the story format (strings, numbers, booleans, lists, tables)."""

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        raise TypeError(v)

    out = [f"{k} = {value(v)}" for k, v in data.items() if k != "characters" and not isinstance(v, dict)]
    out += [
        f"[{k}]\n" + "\n".join(f"{json.dumps(a)} = {value(b)}" for a, b in v.items())
        for k, v in data.items()
        if isinstance(v, dict)
    ]
    for char in data.get("characters", []):
        out.append("[[characters]]\n" + "\n".join(f"{json.dumps(a)} = {value(b)}" for a, b in char.items()))
    return "\n\n".join(out) + "\n"


# -- #23: a full disk ---------------------------------------------------------------------------
@pytest.fixture
def full_disk(tmp_path):
    """A 512 KiB tmpfs, nearly full (root only: mounting needs it)."""
    import os
    import subprocess

    mount = tmp_path / "full"
    mount.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_is_reported_as_a_full_disk_with_nothing_lost(full_disk, tmp_path, capsys):
    import hashlib

    source = tmp_path / "src"
    with RunStore.create(source, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp. " * 3000, state={})
        store.finish()
    on_disk = full_disk / "run"  # a run living on the disk that fills up
    with RunStore.create(on_disk, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
    digest = hashlib.sha256((source / "run.db").read_bytes()).hexdigest()
    free = __import__("shutil").disk_usage(full_disk).free
    (full_disk / "filler").write_bytes(b"\0" * max(0, free - 8192))
    big = tmp_path / "big.md"
    big.write_text("The keeper lit two lamps. " * 20_000)
    for argv in (
        ["fork", str(source), "--at", "1", "--out", str(full_disk / "fork"), "--no-run"],
        ["export", str(source), "-o", str(full_disk / "out.md")],
        ["grammars", "export", str(full_disk / "g")],
        ["edit", str(on_disk), "--chapter", "1", "--file", str(big), "--no-rederive"],
    ):
        line = one_error(capsys, run_cli(argv))
        assert "disk is full" in line and "nothing already committed was lost" in line, (argv, line)
    assert hashlib.sha256((source / "run.db").read_bytes()).hexdigest() == digest
    assert not (full_disk / "fork").exists()  # no half-made fork left behind
    (full_disk / "filler").unlink()
    with RunStore.open(on_disk, readonly=True) as store:
        assert store.chapter(1).version == 1 and store.chapter(1).text == "The keeper lit the lamp."


@pytest.mark.parametrize("table", ["chapters", "states", "llm_calls"])
def test_a_dropped_table_is_a_damaged_run_not_a_completed_one(table, tmp_path, capsys):
    import sqlite3

    run = tmp_path / "run"
    with RunStore.create(run, pipeline="nst", config={"words": 1000, "prompt": "p"}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp.", state={})
        store.finish()
    with sqlite3.connect(run / "run.db") as conn:
        for name in [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]:
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(f"DROP TABLE {table}")
    conn.close()
    for argv in (["resume", str(run)], ["show", str(run)], ["export", str(run)]):
        line = one_error(capsys, run_cli(argv))
        assert "damaged" in line and table in line and "already completed" not in line, line


@pytest.mark.parametrize("where", ["a file", "under a file", "under /proc"])
def test_plan_cache_must_be_a_usable_folder(where, tmp_path, capsys, request):
    from agent.testing.hostile import HostileServer

    server = HostileServer("ok")
    request.addfinalizer(server.close)
    out = _unusable_dirs(tmp_path)[where]
    one_error(
        capsys,
        run_cli(
            [
                "write",
                "nst",
                "--prompt",
                "x",
                "--words",
                "1000",
                "--plan-cache",
                out,
                "--out",
                str(tmp_path / "r"),
                "--endpoint",
                server.url,
            ]
        ),
    )
    assert not (tmp_path / "r").exists() and server.posted() == []
