"""Serving beyond one GPU, checked without one: vLLM's parallelism flags and the multi-node
commands of docs/scale-out.md parse under the installed vLLM's own parser; ``--replicas``
gives each replica its own port and cores (or GPUs) and puts sglang-router in front with a
command its own parser accepts; a dead replica is one line; every run's requests carry its
routing key."""

from __future__ import annotations

import importlib.util
import shlex
import sys
import time
from pathlib import Path

import pytest

from agent.cli import main
from serve.fleet import Fleet
from serve.launcher import ServeConfig, ServeError, server_command
from serve.parallel import Parallelism
from serve.presets import PRESETS
from serve.replicas import RouterConfig, cpu_groups, pinning, replica_configs, router_command
from tests.vllm_serve_cli import parse_serve_argv

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
needs_router = pytest.mark.skipif(
    importlib.util.find_spec("sglang_router") is None, reason="sglang-router not installed (scripts/setup installs it)"
)


def vllm_parse(argv: list[str]):
    return parse_serve_argv(argv)


MULTI_NODE = {
    # docs/scale-out.md, one command per case; vLLM's data_parallel_deployment / parallelism docs.
    "tp8-pp2-ray": Parallelism(tensor=8, pipeline=2, executor="ray"),
    "dp4-head": Parallelism(data=4, data_local=2, data_address="10.0.0.1", data_rpc_port=13345),
    "dp4-other-node": Parallelism(
        data=4, data_local=2, data_start_rank=2, data_address="10.0.0.1", data_rpc_port=13345, headless=True
    ),
    "dp4-ray": Parallelism(data=4, data_local=2, data_backend="ray"),
    "moe-tp8-ep-dp2-ray": Parallelism(tensor=8, data=2, expert=True, data_backend="ray"),
}


@needs_vllm
@pytest.mark.parametrize("case", list(MULTI_NODE))
def test_multi_node_layouts_parse_under_vllms_parser(case):
    layout = MULTI_NODE[case]
    argv, _ = server_command(ServeConfig(model_path="Qwen/Qwen3-14B", served_name="q", device="gpu", parallel=layout))
    args = vllm_parse(argv)
    assert (args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size) == (
        layout.tensor,
        layout.pipeline,
        layout.data,
    )
    assert args.enable_expert_parallel == layout.expert
    assert args.distributed_executor_backend == layout.executor
    assert args.data_parallel_backend == (layout.data_backend or "mp")
    assert args.data_parallel_size_local == layout.data_local
    assert args.data_parallel_address == layout.data_address
    assert args.data_parallel_rpc_port == layout.data_rpc_port
    assert args.data_parallel_start_rank == layout.data_start_rank
    assert args.headless == layout.headless


@needs_vllm
def test_parallelism_flags_reach_vllm_from_the_command_line(capsys, monkeypatch):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: False)
    assert (
        main(
            [
                "serve",
                "--preset",
                "qwen3-32b",
                "--dry-run",
                "--tensor-parallel-size",
                "8",
                "--pipeline-parallel-size",
                "2",
                "--distributed-executor-backend",
                "ray",
                "--enable-expert-parallel",
            ]
        )
        == 0
    )
    words = shlex.split(capsys.readouterr().out.strip())
    args = vllm_parse(words[next(i for i, w in enumerate(words) if "=" not in w) :])
    assert (args.tensor_parallel_size, args.pipeline_parallel_size) == (8, 2)
    assert args.distributed_executor_backend == "ray" and args.enable_expert_parallel


def test_the_multi_gpu_presets_say_how_they_split():
    assert PRESETS["qwen2.5-72b-tp4"].parallel == Parallelism(tensor=4)
    assert PRESETS["qwen3-235b-a22b-tp8-ep"].parallel == Parallelism(tensor=8, expert=True)
    assert PRESETS["qwen3-14b-dp8"].parallel == Parallelism(data=8)
    assert PRESETS["tiny-cpu"].parallel.args() == []  # one GPU (or CPU) adds no flag


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--replicas", "2", "--api-key", "k"], "--api-key is not supported with --replicas"),
        (["--replicas", "0"], "--replicas must be between 1 and 64"),
        (["--replicas", "9"], "9 CPU replicas need at least 9 CPU cores"),
        (["--replicas", "2", "--data-parallel-size", "2"], "--replicas replaces vLLM's data parallelism"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size must be between 1 and 1024"),
        (["--data-parallel-size", "2", "--data-parallel-start-rank", "2"], "--data-parallel-start-rank"),
        (["--headless"], "--headless needs --data-parallel-start-rank"),
        (["--", "--tensor-parallel-size", "2"], "--tensor-parallel-size after '--' is refused"),
    ],
)
def test_bad_scale_out_settings_are_one_line(args, needle, capsys, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    assert main(["serve", "--model", str(model), "--device", "cpu", "--dry-run", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_cpu_replicas_get_their_own_port_and_cores():
    base = ServeConfig(model_path="/m", served_name="m", device="cpu", port=9100, api_key=None)
    replicas = replica_configs(base, 2, cpus=[0, 1])
    assert [r.port for r in replicas] == [9101, 9102]
    assert [r.cpu_threads for r in replicas] == ["0", "1"]
    for replica in replicas:
        argv, env = server_command(replica)
        assert env["VLLM_CPU_OMP_THREADS_BIND"] == replica.cpu_threads and replica.host == "127.0.0.1"
        assert argv[argv.index("--port") + 1] == str(replica.port)
        assert pinning(replica) in ([], ["taskset", "-c", replica.cpu_threads])
    assert cpu_groups([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    assert replica_configs(base, 2, cpus=[0, 1, 2, 3, 6])[1].cpu_threads == "3,6"
    with pytest.raises(ServeError, match="3 CPU replicas need at least 3 CPU cores"):
        replica_configs(base, 3, cpus=[0, 1])


def test_gpu_replicas_split_the_nodes_gpus_and_drop_vllms_own_data_parallelism():
    base = ServeConfig(model_path="m", served_name="m", device="gpu", port=8000, parallel=Parallelism(tensor=2, data=8))
    replicas = replica_configs(base, 4, gpus=8)
    assert [r.visible_devices for r in replicas] == ["0,1", "2,3", "4,5", "6,7"]
    argv, env = server_command(replicas[3])
    assert env["CUDA_VISIBLE_DEVICES"] == "6,7" and "--data-parallel-size" not in argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    with pytest.raises(ServeError, match="need 10 GPUs; 8 found"):
        replica_configs(base, 5, gpus=8)


@needs_router
@pytest.mark.parametrize("policy", ["cache_aware", "manual"])
def test_the_router_command_parses_under_sglang_routers_parser(policy):
    from sglang_router.launch_router import parse_router_args

    config = RouterConfig(
        worker_urls=("http://127.0.0.1:9101", "http://127.0.0.1:9102"), port=9100, policy=policy, metrics_port=9103
    )
    argv = router_command(config)
    assert argv[1:3] == ["-m", "sglang_router.launch_router"]
    parsed = parse_router_args(argv[3:])
    assert parsed.worker_urls == [] and parsed.policy == policy  # workers come by POST /workers
    assert (parsed.host, parsed.port, parsed.prometheus_port) == ("127.0.0.1", 9100, 9103)
    assert parsed.prometheus_host == "127.0.0.1"
    assert parsed.assignment_mode == ("min_group" if policy == "manual" else "random")


def test_replicas_dry_run_prints_every_replica_and_the_router(capsys):
    assert main(["serve", "--replicas", "2", "--dry-run", "--port", "9200"]) in (0, 2)
    out = capsys.readouterr()
    if "CPU cores" in out.err:  # a one-core machine
        pytest.skip(out.err.strip())
    lines = out.out.strip().splitlines()
    assert len(lines) == 5
    assert "--port 9201" in lines[0] and "--port 9202" in lines[1]
    assert "sglang_router.launch_router" in lines[2] and "--port 9200" in lines[2]
    assert "--policy cache_aware" in lines[2]
    for line, port in zip(lines[3:], (9201, 9202), strict=True):
        assert line.startswith("curl -X POST http://127.0.0.1:9200/workers")
        assert f'"url": "http://127.0.0.1:{port}"' in line and '"model_id": "SmolLM2-135M-Instruct"' in line


def test_a_dead_replica_is_one_line_and_stop_ends_every_process(tmp_path):
    base = ServeConfig(model_path="/m", served_name="m", device="cpu", port=9300)
    fleet = Fleet(
        replica_configs(base, 2, cpus=[0, 1]), RouterConfig(worker_urls=("http://127.0.0.1:9301",), port=9300), tmp_path
    )
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    for server in [*fleet.replicas, fleet.router]:
        server.command = lambda: (sleeper, {})  # type: ignore[method-assign]
        server.start()
    lines: list[str] = []
    assert fleet.report_dead(lines.append) == []
    fleet.replicas[1].process.kill()
    fleet.replicas[1].process.wait()
    assert fleet.report_dead(lines.append) == [1] and fleet.report_dead(lines.append) == []
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("replica 2 (port 9302) exited with code -9; 1 of 2 left")
    fleet.stop()
    assert all(s.process.poll() is not None for s in [*fleet.replicas, fleet.router])


def test_every_request_of_a_run_carries_the_runs_routing_key(tmp_path, monkeypatch):
    """sglang-router's manual policy maps ``X-SMG-Routing-Key`` to one replica."""
    from agent.llm.options import LLMOptions, routing_key
    from agent.store import RunStore
    from agent.testing.server import models_server

    with models_server() as server:
        from agent.llm import open_llm

        open_llm("endpoint", endpoint=server.url, probe="light", routing_key="run-abc").close()
        seen = [c.headers.get("X-SMG-Routing-Key") for c in server.calls if c.method == "GET"]
        assert seen and set(seen) == {"run-abc"}

    with RunStore.create(tmp_path / "a", pipeline="nst", config={}) as a:
        key = routing_key(a)
        time.sleep(0.01)
        with RunStore.create(tmp_path / "b", pipeline="nst", config={}) as b:
            assert routing_key(b) != key
    with RunStore.open(tmp_path / "a") as again:
        assert routing_key(again) == key  # a resumed run lands where its prefix is cached
        opened: dict = {}
        monkeypatch.setattr(LLMOptions, "_build", lambda self, probe, key: opened.update(routing_key=key) or _Closed())
        LLMOptions("endpoint", endpoint="http://127.0.0.1:1/v1").open(again)
        assert opened["routing_key"] == key
        LLMOptions("embedded").open(again)
        assert opened["routing_key"] is None


class _Closed:
    def __init__(self) -> None:
        self.recorders: list = []
        self.probe = None


def test_the_router_extra_is_pinned_where_scripts_setup_installs_it():
    import tomllib

    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    extras = extras["project"]["optional-dependencies"]
    assert "sglang-router==0.3.2" in extras["cpu"] and "sglang-router==0.3.2" in extras["gpu"]
    setup = (Path(__file__).resolve().parents[1] / "scripts" / "setup").read_text()
    assert 'extras="cpu,' in setup


def test_stop_before_start_is_harmless(tmp_path):
    base = ServeConfig(model_path="/m", served_name="m", device="cpu", port=9400)
    fleet = Fleet(replica_configs(base, 2, cpus=[0, 1]), RouterConfig(worker_urls=("http://x:1",)), tmp_path)
    fleet.stop()  # the finally of a start that failed early
    assert fleet.report_dead(lambda line: None) == []


@needs_router
def test_the_real_router_lists_the_served_model_and_passes_the_routing_key_on(tmp_path):
    """sglang-router in front of a vLLM-shaped worker (no /server_info, no /model_info): with the
    workers registered by ``Router.wait_ready`` the router lists the served model (not ``unknown``),
    forwards chat requests with fabula's routing header, and passes cached-token usage back."""
    import json
    import urllib.request

    from agent.testing.ports import free_port
    from agent.testing.replies import chat_reply, model_list
    from agent.testing.server import Answer, Call, FakeServer
    from serve.replicas import Router

    model = "SmolLM2-135M-Instruct"

    def chat(call: Call) -> Answer:
        reply = chat_reply("hi", model=call.body["model"], prompt=40, completion=1, cached=32)
        reply["choices"][0]["index"] = 0
        return Answer(200, {"id": "c", "object": "chat.completion", **reply})

    worker = FakeServer(
        {  # vLLM-shaped: no /server_info, no /model_info
            "GET /health": lambda call: Answer(200, b""),
            "GET /v1/models": lambda call: Answer(
                200, model_list({"id": model, "object": "model", "owned_by": "vllm", "max_model_len": 4096})
            ),
            "POST *": chat,
        }
    )
    config = RouterConfig(worker_urls=(worker.root,), model_id=model, port=free_port(), metrics_port=free_port())
    router = Router(config, tmp_path / "router.log")
    router.start()
    try:
        router.wait_ready(60)
        with urllib.request.urlopen(f"http://127.0.0.1:{config.port}/v1/models", timeout=5) as response:
            assert [m["id"] for m in json.load(response)["data"]] == ["SmolLM2-135M-Instruct"]
        from agent.llm import open_llm

        llm = open_llm("endpoint", endpoint=config.endpoint, probe="light", routing_key="run-1")
        try:
            completion = llm.generate([{"role": "user", "content": "hi"}], temperature=0, max_tokens=4)
        finally:
            llm.close()
        assert completion.text == "hi" and completion.usage.cached_prompt_tokens == 32
        # what the server is and its context come from a worker behind the router
        assert (llm.probe.kind, llm.context_length) == ("vllm", 4096)
        seen = [(c.path, c.body.get("model"), c.headers.get("X-SMG-Routing-Key")) for c in worker.posted()]
        assert ("/v1/chat/completions", model, "run-1") in seen
    finally:
        router.stop()
        worker.close()


def test_a_replica_that_dies_while_starting_stops_the_start_with_its_name(tmp_path):
    base = ServeConfig(model_path="/m", served_name="m", device="cpu", port=9500)
    fleet = Fleet(replica_configs(base, 2, cpus=[0, 1]), RouterConfig(worker_urls=("http://x:1",)), tmp_path)
    fleet.replicas[0].command = lambda: ([sys.executable, "-c", "import time; time.sleep(60)"], {})
    fleet.replicas[1].command = lambda: ([sys.executable, "-c", "print('no model'); raise SystemExit(3)"], {})
    try:
        with pytest.raises(ServeError, match=r"replica 2 \(port 9502\) exited with code 3 before it was ready"):
            fleet.start(30, lambda line: None)
    finally:
        fleet.stop()
    assert fleet.replicas[0].process.poll() is not None and fleet.router.process is None
