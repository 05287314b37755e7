"""vLLM's own parallelism, spelled out: tensor, pipeline, data and expert parallel, Ray.

fabula never schedules across GPUs itself: a model too big for one GPU is split by vLLM
(tensor parallel within a node, pipeline parallel across nodes), more throughput comes from
vLLM's data-parallel ranks or from replicas behind a router (:mod:`serve.replicas`), and
several nodes are joined by Ray exactly as vLLM documents it (docs/scale-out.md). Every flag
name here is checked against the installed vLLM's own parser (tests/test_gpu_road.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Backend = Literal["mp", "ray"]


@dataclass(frozen=True)
class Parallelism:
    """How one vLLM deployment spreads over GPUs; the defaults are one GPU, no Ray."""

    tensor: int = 1
    """``--tensor-parallel-size``: GPUs one copy of the model is split across (within a node)."""
    pipeline: int = 1
    """``--pipeline-parallel-size``: stages of layers, usually one per node."""
    data: int = 1
    """``--data-parallel-size``: copies of the model behind vLLM's own balancer."""
    expert: bool = False
    """``--enable-expert-parallel``: spread a MoE model's experts instead of splitting each one."""
    executor: Backend | None = None
    """``--distributed-executor-backend``: ``ray`` for a model spread over several nodes."""
    data_backend: Backend | None = None
    """``--data-parallel-backend``: ``ray`` starts remote DP ranks from one command."""
    data_local: int | None = None
    """``--data-parallel-size-local``: DP ranks on this node (multi-node DP)."""
    data_address: str | None = None
    """``--data-parallel-address``: the head node's address (multi-node DP without Ray)."""
    data_rpc_port: int | None = None
    """``--data-parallel-rpc-port``: the head node's RPC port (multi-node DP without Ray)."""
    data_start_rank: int | None = None
    """``--data-parallel-start-rank``: the first DP rank on this node (a ``--headless`` node)."""
    headless: bool = False
    """``--headless``: run engines only, no API server (the other nodes of a DP deployment)."""

    def __post_init__(self) -> None:
        for name in ("tensor", "pipeline", "data"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= 1024:
                raise ValueError(f"{name} parallel size must be an integer between 1 and 1024, got {value!r}")
        if self.data_local is not None and not 0 <= self.data_local <= self.data:
            raise ValueError(
                f"--data-parallel-size-local must be between 0 and --data-parallel-size "
                f"({self.data}), got {self.data_local}"
            )
        if self.data_start_rank is not None and not 0 <= self.data_start_rank < self.data:
            raise ValueError(
                f"--data-parallel-start-rank must be between 0 and {self.data - 1}, got {self.data_start_rank}"
            )
        if self.data_rpc_port is not None and not 1 <= self.data_rpc_port <= 65535:
            raise ValueError(f"--data-parallel-rpc-port must be between 1 and 65535, got {self.data_rpc_port}")
        if self.headless and self.data_start_rank is None and self.data_backend != "ray":
            raise ValueError("--headless needs --data-parallel-start-rank (which DP ranks this node runs)")

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one copy of the model needs (tensor x pipeline)."""
        return self.tensor * self.pipeline

    @property
    def gpus(self) -> int:
        """GPUs the whole deployment needs, over every node."""
        return self.gpus_per_replica * self.data

    def args(self) -> list[str]:
        """vLLM's flags for this layout; nothing for the one-GPU default (vLLM's defaults)."""
        argv: list[str] = []
        if self.tensor != 1:
            argv += ["--tensor-parallel-size", str(self.tensor)]
        if self.pipeline != 1:
            argv += ["--pipeline-parallel-size", str(self.pipeline)]
        if self.data != 1:
            argv += ["--data-parallel-size", str(self.data)]
        if self.expert:
            argv += ["--enable-expert-parallel"]
        if self.executor:
            argv += ["--distributed-executor-backend", self.executor]
        if self.data_backend:
            argv += ["--data-parallel-backend", self.data_backend]
        if self.data_local is not None:
            argv += ["--data-parallel-size-local", str(self.data_local)]
        if self.data_address:
            argv += ["--data-parallel-address", self.data_address]
        if self.data_rpc_port is not None:
            argv += ["--data-parallel-rpc-port", str(self.data_rpc_port)]
        if self.data_start_rank is not None:
            argv += ["--data-parallel-start-rank", str(self.data_start_rank)]
        if self.headless:
            argv += ["--headless"]
        return argv

    def describe(self) -> str:
        """One line for the terminal: ``TP 4 x PP 1 x DP 2 = 8 GPUs, EP, Ray``."""
        parts = f"TP {self.tensor} x PP {self.pipeline} x DP {self.data} = {self.gpus} GPU(s)"
        if self.expert:
            parts += ", expert parallel"
        if "ray" in (self.executor, self.data_backend):
            parts += ", Ray"
        return parts


ONE_GPU = Parallelism()
