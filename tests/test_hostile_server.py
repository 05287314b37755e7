"""A hostile server cannot hang fabula, exhaust its memory, or make it print a traceback or a
secret: every call ends within its budget with one line naming the endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.llm import EndpointUnavailableError, LLMError
from agent.llm.endpoint import EndpointLLM, normalize_base_url, redact_url
from agent.llm.http import HttpLimits, retry_after_s
from agent.testing.hostile import HostileServer
from agent.testing.replies import chat_reply
from agent.testing.server import Answer

ROOT = Path(__file__).resolve().parents[1]
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def hostile():
    servers: list[HostileServer] = []

    def make(behaviour: str = "ok") -> HostileServer:
        servers.append(HostileServer(behaviour))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def ask(server: HostileServer, **kwargs) -> str:
    llm = EndpointLLM(server.url, "m", limits=HttpLimits(backoff_s=0.01, **kwargs))
    try:
        return llm.generate(USER, temperature=0, max_tokens=5).text
    finally:
        llm.close()


def test_a_server_that_never_answers_ends_the_call_within_its_budget_without_retrying(hostile):
    server = hostile("silent")
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError, match=r"no complete reply .* the 2 s call budget \(not retried"):
        ask(server, call_budget_s=2)
    assert time.monotonic() - started < 6
    assert len(server.posted()) == 1  # a read timeout is not retried blindly


def test_an_endless_body_is_cut_at_the_size_cap(hostile):
    server = hostile("endless")
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"passed the 1048576-byte cap; stopped reading"):
        ask(server, call_budget_s=30, max_response_bytes=2**20)
    assert time.monotonic() - started < 10
    time.sleep(0.2)
    assert server.sent < 16 * 2**20  # reading stopped near the cap (socket buffers aside)


def test_a_trickling_body_ends_at_the_call_budget(hostile):
    server = hostile("trickle")
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError, match="call budget"):
        ask(server, call_budget_s=2)
    assert time.monotonic() - started < 6


@pytest.mark.parametrize(
    "body, problem",
    [
        ([1, 2, 3], "not an object"),
        ({"choices": []}, "no choice"),
        ({"choices": ["x"]}, "no choice"),
        ({"choices": [{"message": "hi"}]}, "without a message object"),
        (chat_reply(content=["a", "b"]), r"non-string content \(list\)"),
        (chat_reply(content={"text": "a"}), r"non-string content \(dict\)"),
        (chat_reply(content=42), r"non-string content \(int\)"),
    ],
)
def test_wrong_shapes_are_one_line_naming_the_endpoint(hostile, body, problem):
    server = hostile("shape")
    server.body = body
    with pytest.raises(LLMError, match=problem) as info:
        ask(server)
    assert server.url in str(info.value) and "\n" not in str(info.value)


def test_odd_usage_and_finish_fields_do_not_break_a_reply(hostile):
    server = hostile("shape")
    server.body = {
        **chat_reply("fine"),
        "usage": {"prompt_tokens": "many", "completion_tokens": -4, "prompt_tokens_details": [1]},
        "model": 7,
    }
    llm = EndpointLLM(server.url, "m")
    completion = llm.generate(USER, temperature=0, max_tokens=5)
    assert completion.text == "fine" and completion.usage.prompt_tokens == 0 and completion.model == "m"


def test_garbage_json_is_one_line(hostile):
    with pytest.raises(LLMError, match=r"not JSON") as info:
        ask(hostile("garbage"))
    assert "\n" not in str(info.value)


def test_500s_then_success_is_retried(hostile):
    server = hostile("flaky")
    assert ask(server) == "recovered"
    assert len(server.posted()) == 3


def test_retry_after_is_honoured_and_bounded_by_the_budget(hostile):
    server = hostile("retry_after")
    server.retry_after = "1"
    assert ask(server) == "after the wait"
    first, second = server.posted()[:2]
    assert second.at - first.at >= 0.95  # waited as asked, not the 10 ms backoff
    late = hostile("retry_after")
    late.retry_after = "120"
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError, match=r"asked to retry .* after 120 s, beyond .* 5 s call budget"):
        ask(late, call_budget_s=5)
    assert time.monotonic() - started < 2


def test_retry_after_forms():
    assert retry_after_s("3") == 3 and retry_after_s("-4") == 0 and retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0  # a date in the past: retry now
    assert retry_after_s(None) is None and retry_after_s("nan") is None


@pytest.mark.parametrize(
    "models, problem",
    [
        ([1, 2, 3], "unexpected shape"),
        ({"data": "abc"}, "unexpected shape"),
        ({"data": [{"name": "x"}]}, "unexpected shape"),
        ({"data": []}, "serves no model"),
    ],
)
def test_malformed_model_lists_are_one_line(hostile, models, problem):
    server = hostile()
    server.models = models
    with pytest.raises(LLMError, match=problem) as info:
        EndpointLLM(server.url)
    assert server.url in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://256.1.1.1/v1",
        "http://[::1",
        "http://",
        "ftp://h/v1",
        "http://h:99999/v1",
        "http://1.2.3/v1",
        " ",
        "http://h:0/v1",
    ],
)
def test_invalid_urls_are_refused_before_any_request(url):
    with pytest.raises(ValueError) as info:
        normalize_base_url(url)
    assert "\n" not in str(info.value)


def test_a_server_echoing_the_credentials_back_does_not_get_them_printed(hostile):
    server = hostile("shape")
    server.body = {"error": "bad key s3cretkey for user admin1:pw9999"}
    url = server.url.replace("http://", "http://admin1:pw9999@") + "?key=s3cretkey"
    with pytest.raises(LLMError) as info:
        EndpointLLM(url, "m").generate(USER, temperature=0, max_tokens=5)
    text = str(info.value)
    assert "s3cretkey" not in text and "pw9999" not in text and "admin1" not in text, text


def test_credentials_never_appear_in_messages():
    assert redact_url("http://user:pa55@h:8/v1?key=s3cret&x=1") == "http://***@h:8/v1?key=***&x=***"
    with pytest.raises(EndpointUnavailableError) as info:
        EndpointLLM("http://user:pa55@127.0.0.1:9/v1?key=s3cret", "m", limits=HttpLimits(backoff_s=0.01, max_retries=1))
    assert "pa55" not in str(info.value) and "s3cret" not in str(info.value)
    with pytest.raises(ValueError) as bad:
        normalize_base_url("http://user:pa55@256.1.1.1/v1")
    assert "pa55" not in str(bad.value)


def _prompt(*args: str, env_extra: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABULA_")}
    env.update(env_extra or {}, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", "prompt", "hi", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.parametrize("behaviour", ["silent", "endless", "garbage", "flaky_forever", "shape"])
def test_fabula_prompt_against_a_hostile_server_is_one_line_in_bounded_time(hostile, behaviour):
    server = hostile("flaky" if behaviour == "flaky_forever" else behaviour)
    server.failures = 99
    server.body = {"choices": [{"message": {"content": [1]}}]}
    started = time.monotonic()
    url = server.url.replace("http://", "http://me:pa55@")
    result = _prompt("--endpoint", url, "--call-timeout", "3")
    assert time.monotonic() - started < 30
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fabula: error: endpoint http://***@127.0.0.1:"), result.stderr
    assert "Traceback" not in result.stderr and "pa55" not in result.stderr + result.stdout


def test_the_reply_cap_is_configurable_from_the_environment(hostile):
    result = _prompt("--endpoint", hostile("endless").url, env_extra={"FABULA_MAX_REPLY_MIB": "0.5"})
    assert result.returncode == 1 and "passed the 524288-byte cap" in result.stderr, result.stderr
    bad = _prompt("--endpoint", hostile().url, env_extra={"FABULA_MAX_REPLY_MIB": "lots"})
    assert bad.returncode != 0 and "FABULA_MAX_REPLY_MIB must be a number" in bad.stderr


def test_fabula_prompt_refuses_a_bad_call_timeout():
    result = _prompt("--endpoint", "http://127.0.0.1:9/v1", "--call-timeout", "-1")
    assert result.returncode == 2 and "--call-timeout" in result.stderr and "Traceback" not in result.stderr


def test_fabula_prompt_works_against_a_well_behaved_server(hostile):
    result = _prompt("--endpoint", hostile().url, "--call-timeout", "5")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_a_server_that_hangs_mid_run_ends_the_run_within_the_budget_and_it_resumes(tmp_path):
    """`write nst` against a server that stops answering after chapter 1: the run fails within the
    call budget (not ~40 minutes), says so in one line, and resumes once the server is back."""
    from agent.store import RunStore
    from agent.testing.author_server import AuthorServer
    from tests.nst.test_cli import _in_flight_chapter_2

    server = AuthorServer(delay_s=0.1)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FABULA_")},
        "FABULA_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(ROOT),
    }
    run_dir = tmp_path / "run"
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent.cli",
                "write",
                "nst",
                "--prompt",
                "a bell rings",
                "--words",
                "3000",
                "--out",
                str(run_dir),
                "--endpoint",
                server.url,
                "--quiet",
                "--call-timeout",
                "2",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not _in_flight_chapter_2(run_dir):
            assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()[-500:]
            time.sleep(0.05)
        server.delay_s = 60  # the server hangs
        hung_at = time.monotonic()
        _, err = process.communicate(timeout=60)
        assert time.monotonic() - hung_at < 20  # one 2 s call budget (plus the run's own bookkeeping)
        assert process.returncode != 0
        lines = [line for line in err.strip().splitlines() if line.startswith("fabula: error:")]
        assert len(lines) == 1 and "call budget" in lines[0] and "Traceback" not in err, err
        with RunStore.open(run_dir, readonly=True) as store:
            assert store.info().last_unit == 1
        server.delay_s = 0.0  # back
        resumed = subprocess.run(
            [sys.executable, "-m", "agent.cli", "resume", str(run_dir), "--endpoint", server.url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        with RunStore.open(run_dir, readonly=True) as store:
            assert [c.index for c in store.chapters()] == [1, 2, 3] and store.info().status == "completed"
    finally:
        server.close()


@pytest.mark.parametrize("behaviour", ["silent", "endless", "garbage", "shape"])
def test_fabula_write_magnet_against_a_hostile_server_is_one_line_and_keeps_nothing_unpaid(
    hostile, behaviour, tmp_path
):
    """#14: the hostile server driven against `write magnet` too: one line, bounded time, no traceback,
    no secret, and no run left behind when no model call was paid for."""
    server = hostile(behaviour)
    server.body = {"choices": [{"message": {"content": [1]}}]}
    url = server.url.replace("http://", "http://me:pa55@")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABULA_")}
    env.update(PYTHONPATH=str(ROOT), FABULA_HOME=str(tmp_path / "home"))
    out = tmp_path / "run"
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "write",
            "magnet",
            str(ROOT / "agent" / "magnet" / "examples" / "mystery_codicil.toml"),
            "--words",
            "150",
            "--endpoint",
            url,
            "--call-timeout",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert time.monotonic() - started < 60
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("fabula: error:")]
    assert result.returncode != 0 and len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr and "pa55" not in result.stderr + result.stdout
    if out.exists():  # kept only because calls were made and recorded: resumable, never half-deleted
        from agent.store import RunStore

        with RunStore.open(out, readonly=True) as store:
            assert store.info().status == "failed" and store.query("SELECT count(*) FROM llm_calls")[0][0] > 0


# -- #23: nested payloads and huge numbers ------------------------------------------------------
DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("where", ["reply", "content", "error", "models"])
def test_json_nested_too_deeply_is_one_line(hostile, where):
    """A server's JSON nested 100,000 deep (anywhere: the reply, its constrained content, an error
    body, the model list) is one LLMError line, never a RecursionError."""
    server = hostile("raw")
    server.raw = DEEP
    if where == "content":
        server.raw = b'{"choices": [{"message": {"content": "' + DEEP + b'"}, "finish_reason": "stop"}]}'
    elif where == "error":
        server.routes["POST *"] = lambda call: Answer(400, DEEP)
    elif where == "models":
        server.models = DEEP
    with pytest.raises(LLMError) as info:
        llm = EndpointLLM(server.url, None if where == "models" else "m", limits=HttpLimits(backoff_s=0.01))
        try:
            llm.generate(USER, {"type": "object"} if where == "content" else None, temperature=0, max_tokens=5)
        finally:
            llm.close()
    assert "\n" not in str(info.value) and len(str(info.value)) < 500, info.value
    assert where == "content" or server.url in str(info.value)


def test_fabula_prompt_against_deeply_nested_json_is_one_error_line(hostile):
    server = hostile("raw")
    server.raw = DEEP
    result = _prompt("--endpoint", server.url, "--call-timeout", "5")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("fabula: error: endpoint "), result.stderr


@pytest.mark.parametrize("count", [10**30, 2**63, -1, 2**31])
def test_absurd_usage_numbers_count_as_unknown(hostile, count):
    server = hostile("shape")
    server.body = {
        **chat_reply("fine"),
        "usage": {
            "prompt_tokens": count,
            "completion_tokens": count,
            "prompt_tokens_details": {"cached_tokens": count},
        },
    }
    llm = EndpointLLM(server.url, "m")
    try:
        usage = llm.generate(USER, temperature=0, max_tokens=5).usage
    finally:
        llm.close()
    assert usage.prompt_tokens == usage.completion_tokens == usage.cached_prompt_tokens == 0


def test_a_run_against_a_server_reporting_10_to_the_30_tokens_completes(tmp_path, monkeypatch, capsys):
    """The ledger stores 64-bit integers: a count of 10**30 read as is stopped the run mid-story
    (OverflowError); read where the reply is read, it is no count and the run completes."""
    from agent.cli import main
    from agent.store import RunStore
    from agent.testing.author_server import AuthorServer

    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    server = AuthorServer()
    server.prompt_tokens = 10**30
    try:
        code = main(
            [
                "write",
                "direct",
                "--prompt",
                "a bell rings",
                "--words",
                "1000",
                "--out",
                str(tmp_path / "run"),
                "--endpoint",
                server.url,
                "--quiet",
            ]
        )
    finally:
        server.close()
    assert code in (0, 1), capsys.readouterr().err
    err = capsys.readouterr().err
    assert "internal error" not in err and "Overflow" not in err, err
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        calls = store.ledger.llm_calls()
    assert calls and all(0 <= c.prompt_tokens < 2**31 for c in calls)


def test_fabula_prompt_warns_and_exits_3_when_the_reply_was_cut(hostile):
    """A reply cut at --max-tokens (finish_reason=length) is printed, never passed off as whole:
    a warning line on stderr and exit 3."""
    server = hostile("shape")
    server.body = chat_reply("The keeper lit the", finish="length")
    result = _prompt("--endpoint", server.url, "--max-tokens", "5")
    assert result.returncode == 3 and result.stdout.strip() == "The keeper lit the", result.stderr
    assert "cut at --max-tokens 5" in result.stderr and "Traceback" not in result.stderr
    server.body = chat_reply("Whole.")
    assert _prompt("--endpoint", server.url).returncode == 0


@pytest.mark.parametrize(
    "status, cause", [(401, "HTTP 401"), ("401 after the probe", "HTTP 401"), (500, "HTTP 500"), (200, "not JSON")]
)
def test_magnet_against_a_failing_server_says_the_servers_cause_and_stops_at_a_401(hostile, tmp_path, status, cause):
    """#23: every Magnet server failure ended as "step 1: no character produced an action", after
    8 calls even on a 401. The line now carries the server's cause, and a refused credential
    stops at the first refusal: in the probe, or in the run's first round of calls."""
    from agent.llm.probe import PROBE_ASK, RANGE_ASK

    server = hostile("custom")
    refused = (401, {"error": {"message": "invalid api key"}})
    if status == 200:
        server.behaviour = "garbage"
    elif status == 500:
        server.custom = lambda body: (500, {"error": {"message": "boom"}})
    elif status == 401:
        server.custom = lambda body: refused
    else:  # the probe is answered (an open /v1 proxy in front of a keyed backend), the story's calls are not
        server.custom = lambda body: (
            (200, chat_reply("Hello there!")) if body["messages"] in (PROBE_ASK, RANGE_ASK) else refused
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABULA_")}
    env.update(PYTHONPATH=str(ROOT), FABULA_HOME=str(tmp_path / "home"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "write",
            "magnet",
            str(ROOT / "agent" / "magnet" / "examples" / "mystery_codicil.toml"),
            "--words",
            "150",
            "--endpoint",
            server.url,
            "--call-timeout",
            "5",
            "--allow-unconstrained",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("fabula: error:")]
    assert result.returncode != 0 and len(errors) == 1 and cause in errors[0], result.stderr
    paths = [c.path for c in server.posted()]
    story = [
        b
        for b, path in zip(server.bodies, paths, strict=True)
        if path.endswith("/chat/completions") and b["messages"] not in (PROBE_ASK, RANGE_ASK)
    ]
    if status == 401:
        assert story == [] and paths.count("/v1/chat/completions") == 1  # the probe's first, no more
    elif status != 200 and status != 500:
        characters = len(
            __import__("tomllib").loads((ROOT / "agent/magnet/examples/mystery_codicil.toml").read_text())["characters"]
        )
        assert len(story) <= characters, len(story)  # the first round only, never re-asked
