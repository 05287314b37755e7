"""Two tiny-cpu vLLM replicas (one core each) behind sglang-router, started by ``fabula serve
--replicas 2``: a ``fabula batch`` of four short stories at once through the router's one endpoint
all complete (``agent.batch.run_batch``, the engine behind the command), and
every request of a story after its first finds that story's prompt in the cache, i.e. it
reached the replica that served the story before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from agent.testing.ports import free_port
from tests.conftest import ROOT, SERVER_READY_TIMEOUT_S, _missing, ctrl_c_reaches

pytestmark = pytest.mark.server

PREMISES = [
    "A lighthouse keeper on a northern island finds a brass key inside a fish and spends one stormy night "
    "searching the tower for the lock it opens, while the radio keeps repeating a ship's name she knows.",
    "Two rival bakers in a mountain village are snowed in together on the eve of the harvest fair and must "
    "share one oven, one sack of flour and the secret recipe each of them swore never to tell anyone.",
    "A retired astronaut teaches her grandson to read the night sky from a rooftop in Lisbon and realises, "
    "star by star, that the stories she tells him are slowly turning into the truth about her last mission.",
    "A clockmaker's apprentice in old Prague repairs a clock that runs backwards and notices that every "
    "hour it loses returns something the town had forgotten: a song, a street name, a missing cat.",
]


# vLLM's CPU backend caches prompts in blocks of 128 tokens: each premise is long enough
# (~350 tokens of prompt) for two full blocks that no other story shares.
NOTES = (
    " Keep the tone quiet and precise. The weather matters to the plot. Every object that appears early "
    "returns at the end. Dialogue is sparse and each line reveals character. The ending is earned, not "
    "announced. Names are short and easy to remember. Time passes in one night or one day at most. The "
    "narrator never explains what the reader can infer. Small sensory details anchor every scene. "
) * 3


@pytest.fixture(scope="module")
def router_endpoint() -> Iterator[str]:
    """``fabula serve --replicas 2`` (cache_aware policy) on free ports; yields the router's endpoint."""
    missing = _missing("vllm", "sglang_router")
    if missing:
        pytest.skip(f"missing {', '.join(missing)}: run scripts/setup to run the router test")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two replicas on their own cores need two CPU cores")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "serve",
            "--preset",
            "tiny-cpu",
            "--replicas",
            "2",
            "--port",
            str(port),
            "--cpu-kv-cache-gib",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        preexec_fn=ctrl_c_reaches,
    )
    output: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip())
            if "ready in" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    while not ready.is_set():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("fabula serve --replicas 2 did not become ready:\n" + "\n".join(output[-40:]))
        time.sleep(1)
    line = next(line for line in output if "ready in" in line)
    yield line.split("endpoint=")[1].split()[0]
    process.send_signal(signal.SIGINT)
    try:  # the fleet's own bound: the router's escalation (30 s), then the replicas' at once (50 s)
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("Ctrl-C did not stop fabula serve --replicas within 90 s")
    assert process.returncode == 0, "\n".join(output[-20:])


def write_batch(folder, premises: list[str], endpoint: str) -> list[tuple[str, list[dict]]]:
    """The premises as one ``fabula batch`` of short Direct stories, all at once, through the
    router (a 40-word target, a narrow gate: most first drafts are re-asked); each story's status
    and its answered calls in order."""
    import json

    from agent.batch.runner import run_batch
    from agent.llm.options import LLMOptions
    from agent.store import RunStore

    prompts = folder.parent / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i + 1, "prompt": p}) + "\n" for i, p in enumerate(premises)))
    result = run_batch(
        folder,
        "direct",
        prompts=prompts,
        words=40,
        concurrency=len(premises),
        settings={"gate_low": 0.9, "gate_high": 1.1, "attempts": 3, "min_tokens": False},
        llm=LLMOptions("endpoint", endpoint=endpoint),
    )
    out = []
    for story in result.stories:
        store = RunStore.open(folder / story.run_dir, readonly=True)
        try:
            out.append(
                (
                    story.status,
                    [
                        dict(r)
                        for r in store.query(
                            "SELECT prompt_tokens, cached_prompt_tokens FROM llm_calls WHERE error IS NULL ORDER BY id"
                        )
                    ],
                )
            )
        finally:
            store.close()
    return out


def test_stories_at_once_through_the_router_each_stay_on_their_replica(router_endpoint, tmp_path):
    results = write_batch(tmp_path / "batch", [premise + NOTES for premise in PREMISES], router_endpoint)
    assert [status for status, _ in results] == ["completed"] * len(PREMISES)
    follow_ups = 0
    for _, calls in results:
        first = calls[0]
        for later in calls[1:]:
            follow_ups += 1
            # A re-ask starts with the story's whole first prompt (two or more 128-token blocks);
            # on the other replica no block is cached: each story's first block holds its premise.
            assert later["cached_prompt_tokens"] >= first["prompt_tokens"] // 2, calls
    assert follow_ups >= 2, results  # a narrow gate re-asks nearly every first draft
