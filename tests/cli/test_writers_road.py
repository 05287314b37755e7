"""The writer's road through the CLI against a server (#26): one model resolution, a run that
continues on its own server with no flags, refusals that leave a run as it was, the call
timeout bounding the pre-run check, the config file, the profile that follows the model, and
a batch that stops on a dead server. The server is the scripted author behind a vLLM-shaped
HTTP server (``agent/testing/author_server.py``): the real endpoint backend, probe and ledger."""

from __future__ import annotations

import json
import time

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author_server import AuthorServer

PROMPT = "A lighthouse keeper finds a bell that rings by itself."


def _write(server: AuthorServer, out, *extra: str) -> int:
    return main(
        ["write", "nst", "--prompt", PROMPT, "--words", "1000", "--endpoint", server.url, "--out", str(out), *extra]
    )


def _stopped_after_chapter_one(server: AuthorServer, out) -> None:
    """A run whose server broke during chapter 2 (HTTP 500 from then on)."""
    server.fail_after = 5  # the outline, then chapter 1's write, prose, update and finish
    assert _write(server, out, "--call-timeout", "5") == 1
    server.fail_after = None
    with RunStore.open(out, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("failed", 1)


@pytest.fixture
def server():
    with AuthorServer(vllm=True) as running:
        yield running


@pytest.fixture(autouse=True)
def _no_model_environment(monkeypatch):
    for name in (
        "FABULA_ENDPOINT",
        "FABULA_MODEL",
        "FABULA_API_KEY",
        "FABULA_CALL_TIMEOUT",
        "FABULA_ALLOW_UNCONSTRAINED",
    ):
        monkeypatch.delenv(name, raising=False)


def test_resume_with_no_flags_continues_on_the_server_the_run_was_written_on(server, tmp_path, capsys):
    out = tmp_path / "run"
    _stopped_after_chapter_one(server, out)
    before = server.count
    capsys.readouterr()
    assert main(["resume", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"at {server.url}, model scripted-author (endpoint from the run's record)" in err
    assert server.count > before  # chapter 2 was written by this server
    with RunStore.open(out, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("completed", 2)


def test_a_write_and_a_resume_each_open_one_client(server, tmp_path):
    out = tmp_path / "run"
    _stopped_after_chapter_one(server, out)
    assert server.model_lists == 1  # the pre-run check is the run's own client: one probe, not two
    assert main(["resume", str(out)]) == 0
    assert server.model_lists == 2


def test_a_moved_server_is_given_with_endpoint_and_is_no_configuration_change(server, tmp_path, capsys):
    out = tmp_path / "run"
    _stopped_after_chapter_one(server, out)
    with AuthorServer(vllm=True) as moved:
        assert main(["resume", str(out), "--endpoint", moved.url, "--quiet"]) == 0
        assert moved.count and "changed" not in capsys.readouterr().err


def test_fork_and_edit_use_the_runs_server_and_a_fork_resumes_as_printed(server, tmp_path, capsys):
    out, fork, edited = tmp_path / "run", tmp_path / "fork", tmp_path / "ch1.md"
    assert _write(server, out) == 0
    edited.write_text("The keeper buried the bell under the pier and said nothing to anyone about the storm.")
    before = server.count
    assert main(["edit", str(out), "--chapter", "1", "--file", str(edited)]) == 0  # re-derived on the server
    assert server.count > before  # the re-derivation called the run's own server
    capsys.readouterr()
    assert main(["fork", str(out), "--at", "1", "--out", str(fork), "--no-run"]) == 0
    printed = capsys.readouterr().err.strip().splitlines()[-1]
    assert printed == f"continue it with: fabula resume {fork}"
    assert main([*printed.removeprefix("continue it with: fabula ").split(), "--quiet"]) == 0
    with RunStore.open(fork, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("completed", 2)


def test_a_refused_resume_leaves_the_runs_status_as_it_was(server, tmp_path, capsys):
    out = tmp_path / "run"
    _stopped_after_chapter_one(server, out)
    server.close()  # the server is gone
    capsys.readouterr()
    assert main(["resume", str(out), "--call-timeout", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fabula: error: cannot reach the server") and "nothing was started" in err[-1]
    assert main(["resume", str(out), "--model", "another-model"]) == 2  # a configuration change, not forced
    with RunStore.open(out, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("failed", 1)
        assert [r[0] for r in store.query("SELECT kind FROM sessions ORDER BY id")] == ["start"]


@pytest.mark.parametrize("command", ["write", "resume", "batch"])
def test_a_server_stalling_on_its_model_list_is_bounded_by_the_call_timeout(server, tmp_path, capsys, command):
    out = tmp_path / "run"
    if command == "resume":
        _stopped_after_chapter_one(server, out)
    server.stall_models = True
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": 1, "prompt": PROMPT}) + "\n")
    argv = {
        "write": ["write", "nst", "--prompt", PROMPT, "--words", "1000", "--endpoint", server.url, "--out", str(out)],
        "resume": ["resume", str(out)],
        "batch": [
            "batch",
            "--pipeline",
            "nst",
            "--prompts",
            str(prompts),
            "--words",
            "1000",
            "--endpoint",
            server.url,
            "--out",
            str(tmp_path / "batch"),
        ],
    }[command]
    capsys.readouterr()
    started = time.monotonic()
    assert main([*argv, "--call-timeout", "2"]) == 2
    assert time.monotonic() - started < 30  # the default is 600 s
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("fabula: error: cannot reach the server")
    assert command == "resume" or not (tmp_path / ("run" if command == "write" else "batch")).exists()


def test_the_config_file_is_below_the_environment_and_flags(server, tmp_path, monkeypatch, capsys):
    assert main(["config", "set", "endpoint", server.url]) == 0
    assert main(["config", "set", "call_timeout", "30"]) == 0
    capsys.readouterr()
    assert main(["config", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["endpoint"]["value"] == server.url and shown["endpoint"]["source"].startswith("config file")
    assert shown["call_timeout"]["value"] == 30.0
    out = tmp_path / "run"
    assert main(["write", "nst", "--prompt", PROMPT, "--words", "1000", "--out", str(out)]) == 0
    assert f"at {server.url}, model scripted-author (endpoint from config file)" in capsys.readouterr().err
    monkeypatch.setenv("FABULA_ENDPOINT", "http://127.0.0.1:9/v1")  # the environment beats the file ...
    assert main(["write", "nst", "--prompt", PROMPT, "--words", "1000", "--out", str(tmp_path / "x")]) == 2
    assert "127.0.0.1:9" in capsys.readouterr().err
    assert _write(server, tmp_path / "y") == 0  # ... and a flag beats both


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("call_timeout", "nan", "between 0 and 86400"),
        ("call_timeout", "-1", "between 0 and 86400"),
        ("profile", "huge", "profile must be one of"),
        ("endpoint", "localhost:8000", "http:// or https://"),
        ("allow_unconstrained", "perhaps", "true or false"),
    ],
)
def test_bad_config_values_are_one_line_and_nothing_is_written(key, value, needle, capsys):
    assert main(["config", "set", key, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
    assert main(["config", "unset", key]) == 2  # never written


def test_a_damaged_config_file_is_one_line_for_every_model_command(tmp_path, capsys):
    from agent.cli.config_file import config_path

    config_path().parent.mkdir(parents=True, exist_ok=True)
    config_path().write_text("endpoint = [unclosed\n")
    assert main(["write", "nst", "--prompt", PROMPT, "--words", "1000", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not valid TOML" in err[0] and not (tmp_path / "r").exists()
    config_path().write_text('endpoints = "http://x"\n')
    assert main(["config", "show"]) == 2
    assert "unknown key 'endpoints'" in capsys.readouterr().err


def test_the_profile_follows_a_tiny_model_and_a_flag_overrides_it(tmp_path, capsys):
    with AuthorServer(model="HuggingFaceTB/SmolLM2-135M-Instruct", vllm=True) as tiny:
        assert _write(tiny, tmp_path / "auto") == 0
        err = capsys.readouterr().err
        assert "profile small for the tiny model HuggingFaceTB/SmolLM2-135M-Instruct (135M parameters" in err
        assert _write(tiny, tmp_path / "asked", "--profile", "default") == 0
        assert "profile small" not in capsys.readouterr().err
    with RunStore.open(tmp_path / "auto", readonly=True) as store:
        assert store.info().config["profile"] == "small"
        assert store.plans.get("profile_choice") == {
            "asked": "auto",
            "chosen": "small",
            "reason": store.plans.get("profile_choice")["reason"],
        }
    with RunStore.open(tmp_path / "asked", readonly=True) as store:
        assert store.info().config["profile"] == "default"


def test_batch_stops_starting_stories_after_consecutive_failures_with_one_cause(server, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": n, "prompt": f"{PROMPT} ({n})"}) + "\n" for n in range(1, 9)))
    server.fail_chats = True  # answers the probe, then HTTP 500 for every story call
    out = tmp_path / "batch"
    assert (
        main(
            [
                "batch",
                "--pipeline",
                "nst",
                "--prompts",
                str(prompts),
                "--words",
                "1000",
                "--endpoint",
                server.url,
                "--out",
                str(out),
                "--call-timeout",
                "5",
                "--quiet",
            ]
        )
        == 1
    )
    printed = capsys.readouterr().out
    assert "stopped starting stories: 3 in a row failed with the same cause" in printed
    assert "5 not started are pending for fabula batch resume" in printed
    server.fail_chats = False
    capsys.readouterr()
    assert main(["batch", "resume", str(out), "--quiet"]) == 0  # no flags: the batch's own server
    assert "8 of 8 stories completed" in capsys.readouterr().out


def test_chapters_that_cannot_fit_the_context_are_planned_shorter_not_stopped(server, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "2000",
                "--context-tokens",
                "5000",
                "--endpoint",
                server.url,
                "--out",
                str(out),
            ]
        )
        == 0
    )  # the 2 planned chapters stopped in chapter 2
    assert "planning 5 chapters instead of 2: a chapter of the planned length needs about" in capsys.readouterr().err
    with RunStore.open(out, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("completed", 5)
        assert store.plans.get("chapters_fitted")["planned"] == 2


def _said(captured, needle: str) -> int:
    return (captured.out + captured.err).count(needle)


def test_every_command_that_ends_a_book_prints_the_one_next_step(server, tmp_path, capsys):
    out = tmp_path / "run"
    _stopped_after_chapter_one(server, out)
    failed = capsys.readouterr()
    assert _said(failed, f"fabula resume {out}") == 1, failed  # a failure's next step, once
    assert main(["resume", str(out)]) == 0
    done = capsys.readouterr()
    step = f"next: read it: fabula view {out} · export it: fabula export {out} -o book.docx"
    assert _said(done, step) == 1 and _said(done, "next:") == 1, done
    assert main(["continue", str(out), "--words", "500", "--endpoint", server.url]) == 0
    assert _said(capsys.readouterr(), step) == 1
    sequel = tmp_path / "sequel"
    assert main(["sequel", str(out), "--out", str(sequel), "--words", "500", "--endpoint", server.url]) == 0
    assert _said(capsys.readouterr(), f"next: read it: fabula view {sequel} · export it: fabula export {sequel}") == 1
    fresh = tmp_path / "fresh"
    assert _write(server, fresh) == 0
    assert _said(capsys.readouterr(), f"next: read it: fabula view {fresh} · export it") == 1


def test_everyday_progress_is_in_a_writers_words_and_the_internals_are_behind_verbose(server, tmp_path, capsys):
    out = tmp_path / "run"
    assert _write(server, out) == 0
    err = capsys.readouterr().err
    written = [ln for ln in err.splitlines() if " written (" in ln]
    assert written and all("words" in ln and "ETA" in ln for ln in written), err
    assert not any("calls" in ln or "tokens" in ln or "cached" in ln for ln in written), written
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "KiB" not in shown and "context" not in shown and "estimated" not in shown
    assert main(["show", str(out), "-v"]) == 0
    shown = capsys.readouterr().out
    context = next(ln for ln in shown.splitlines() if ln.startswith("context"))
    assert "chars-estimate" not in context and "unknown (" not in context, context
    assert "token counts estimated from the characters" in context or "counted exactly" in context, context
    verbose = tmp_path / "verbose"
    assert _write(server, verbose, "-v") == 0
    written = [ln for ln in capsys.readouterr().err.splitlines() if " written (" in ln]
    assert written and all("calls" in ln and "tokens" in ln for ln in written), written
