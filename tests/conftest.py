"""Shared fixtures: the real embedded model and a real vLLM server started by ``fabula serve``.

Both are session-scoped: the model is converted once (cached under $FABULA_HOME) and the
server is started once for every test that needs it. Tests that need them skip only when
the packages are not installed, and say so.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
SERVER_READY_TIMEOUT_S = 900
_ISOLATED_CONFIG = Path(os.environ.get("TMPDIR", "/tmp")) / f"fabula-tests-{os.getpid()}" / "config.toml"
os.environ["FABULA_CONFIG"] = str(_ISOLATED_CONFIG)
"""No test (nor the CLI it starts in a subprocess) reads the developer's own config file: a
test that wants one writes this path or sets FABULA_CONFIG itself."""


@pytest.fixture(autouse=True)
def _no_config_file():
    _ISOLATED_CONFIG.unlink(missing_ok=True)
    yield
    _ISOLATED_CONFIG.unlink(missing_ok=True)


MODEL_VARIABLES = ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY", "FABULA_CALL_TIMEOUT")
"""The environment that would choose a model for a command behind a test's back."""


@pytest.fixture
def no_model_environment(monkeypatch, tmp_path):
    """A CLI journey's own ``$FABULA_HOME`` (its plan cache) and none of the model variables, so
    the commands a test runs choose their model from their flags and the run alone."""
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    for name in MODEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


@pytest.fixture(scope="session")
def embedded_llm():
    missing = _missing("torch", "transformers", "outlines", "outlines_core")
    if missing:
        pytest.skip(
            f"embedded backend not installed (missing {', '.join(missing)}): "
            "run scripts/setup (or pip install -e '.[cpu]')"
        )
    from agent.llm.embedded_engines import open_embedded

    llm = open_embedded()  # the default engine: llama.cpp where installed, else transformers
    yield llm
    llm.close()


@pytest.fixture()
def llamacpp(embedded_llm):
    """The embedded model on llama.cpp (skipped where the default engine is transformers)."""
    if embedded_llm.engine != "llama.cpp":
        pytest.skip("the default engine is transformers here")
    return embedded_llm


@pytest.fixture(scope="session")
def transformers_llm():
    """The embedded model on the transformers engine (the fallback where llama.cpp is absent)."""
    missing = _missing("torch", "transformers", "outlines", "outlines_core")
    if missing:
        pytest.skip(f"embedded backend not installed (missing {', '.join(missing)})")
    from agent.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM()
    yield llm
    llm.close()


def ctrl_c_reaches() -> None:
    """``preexec_fn`` of a child a test stops with SIGINT: SIGINT back to its default. A shell
    runs a background job (``.ci/run &``) with SIGINT ignored, every child inherits that, and
    Python then never raises KeyboardInterrupt: the test's Ctrl-C would not arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class RunningServer:
    def __init__(self, process: subprocess.Popen, endpoint: str, model: str, output: list[str]) -> None:
        self.process = process
        self.endpoint = endpoint
        self.model = model
        self.output = output


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[RunningServer]:
    """``fabula serve --preset tiny-cpu`` on a free port, exactly as a user starts it."""
    if _missing("vllm"):
        pytest.skip(
            "vLLM is not importable here: run scripts/setup (or pip install -e '.[cpu]') to run the server tests"
        )
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "serve", "--preset", "tiny-cpu", "--port", str(port)],
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
            pytest.fail("fabula serve did not become ready:\n" + "\n".join(output[-40:]))
        time.sleep(1)
    line = next(line for line in output if "ready in" in line)
    endpoint = line.split("endpoint=")[1].split()[0]
    model = line.split("model=")[1].split()[0]
    server = RunningServer(process, endpoint, model, output)
    yield server
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def endpoint_llm(vllm_server: RunningServer):
    from agent.llm.endpoint import EndpointLLM

    llm = EndpointLLM(vllm_server.endpoint)
    yield llm
    llm.close()


@pytest.fixture(scope="session")
def llamacpp_server(tmp_path_factory) -> Iterator[RunningServer]:
    """llama-cpp-python's OpenAI-compatible server on the embedded default's GGUF, context 4096."""
    from serve.llamacpp import MODEL_ALIAS, llamacpp_command, llamacpp_importable

    if not llamacpp_importable():
        pytest.skip(
            "llama-cpp-python[server] is not installed: run scripts/setup --llamacpp "
            "(it compiles llama.cpp once) to run the llama.cpp server tests"
        )
    import httpx

    from agent.weights.models import ensure_gguf

    port = free_port()
    log_path = tmp_path_factory.mktemp("llamacpp") / "server.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            llamacpp_command(ensure_gguf(), port), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ)
        )
        endpoint = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(endpoint + "/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("llama-cpp-python's server did not become ready:\n" + log_path.read_text()[-3000:])
            time.sleep(0.5)
        yield RunningServer(process, endpoint, MODEL_ALIAS, [])
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def llamacpp_llm(llamacpp_server: RunningServer):
    from agent.llm.endpoint import EndpointLLM

    llm = EndpointLLM(llamacpp_server.endpoint, probe="full")
    yield llm
    llm.close()


@pytest.fixture(params=["vllm", pytest.param("llamacpp", marks=pytest.mark.slow)])
def served(request) -> RunningServer:
    """Each real server in turn (a test that takes it runs against vLLM and llama-cpp-python).

    The llama-cpp-python run is ``slow`` (93 s in CI, #35: .ci/scheduled runs it): CI keeps the
    Magnet step on vLLM and llama-cpp-python's server under an NST chapter and its schema tests."""
    return request.getfixturevalue(f"{request.param}_server")


MODEL_FIXTURES = {
    "embedded_llm": "embedded",
    "transformers_llm": "embedded",
    "vllm_server": "server",
    "endpoint_llm": "server",
    "llamacpp_server": "server",
    "llamacpp_llm": "server",
    "served": "server",
}
"""The fixtures that load the tiny model or start a real server, and the marker a test taking one wears."""


def pytest_collection_modifyitems(config, items) -> None:
    """A test that takes a model fixture wears its marker: scripts/test runs the unmarked tests on two
    workers and the marked ones one at a time (each uses both cores), so a missing marker would start
    a model in every worker at once."""
    unmarked = [
        f"{item.nodeid} takes {name} but is not marked {marker}"
        for item in items
        for name, marker in MODEL_FIXTURES.items()
        if name in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None
    ]
    if unmarked:
        raise pytest.UsageError("\n".join(unmarked))
