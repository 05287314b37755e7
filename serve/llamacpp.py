"""llama-cpp-python's OpenAI-compatible server on the embedded default's own GGUF.

A second real server beside vLLM, for the tests and for anyone who wants one without vLLM:
it serves the same SmolLM2-135M-Instruct (the Q4_1 GGUF the embedded model is converted
from), so the two servers differ in the server, not the model. It is an optional install
(``scripts/setup --llamacpp``, README "Supported servers"): PyPI ships llama-cpp-python as
source only, so it is compiled on first install.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

MODEL_ALIAS = "SmolLM2-135M-Instruct"
CONTEXT = 4096  # as tiny-cpu serves it, so the same tests fit both servers


def llamacpp_importable() -> bool:
    """Whether ``llama_cpp.server`` can be started here (llama-cpp-python with its server extra)."""
    return all(
        importlib.util.find_spec(m) is not None
        for m in ("llama_cpp", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
    )


def llamacpp_command(
    gguf: Path, port: int, *, host: str = "127.0.0.1", n_ctx: int = CONTEXT, threads: int | None = None
) -> list[str]:
    """The argv that serves ``gguf`` at ``http://host:port/v1`` under :data:`MODEL_ALIAS`.

    ``logits_all`` is off: the server's default keeps every prompt position's logits, which
    only log-probabilities need and which slows every prefill. ``threads``: all cores but one by
    default, since llama.cpp's threads spin at their barriers and a client busy on the last core
    (a test runner, the pipeline) slowed decoding twelvefold on 2 cores.
    """
    threads = threads or max(1, len(os.sched_getaffinity(0)) - 1)
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--logits_all",
        "false",
        "--verbose",
        "false",
    ]
