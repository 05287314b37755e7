"""How much of a GPU a preset needs, computed from the model's ``config.json`` and the card's memory.

A preset states the context and the number of sequences it holds on a card, computed the way vLLM
does at start from ``serve/model_configs/OWNER--NAME.json``; a card where it cannot start is
refused with the sums. Why, and the arithmetic per GPU: docs/design/sizing.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

GIB = 2**30
CONFIGS = Path(__file__).with_name("model_configs")
RUNTIME_RESERVE = int(1.5 * GIB)
"""CUDA context, CUDA graphs and allocator slack inside vLLM's budget: an estimate, stated once."""


def server_defaults(card_bytes: int) -> tuple[int, int]:
    """vLLM 0.32's ``max_num_batched_tokens`` and ``max_num_seqs`` for an OpenAI server on a card of
    this size (``EngineArgs``' defaults by device memory; an A100 80GB gets the smaller pair, so
    using the larger one for every 70+ GiB card over-counts activations, never under-counts)."""
    if card_bytes >= 160 * GIB:
        return 16384, 1024
    if card_bytes >= 70 * GIB:
        return 8192, 1024
    return 2048, 256


DESKTOP_RESERVE = int(1.5 * GIB)
"""What a desktop session (display server, browser) may hold on a desktop card: vLLM refuses to
start when free memory is below utilization x total, so desktop presets leave this much."""
UTILIZATION_CAP = 0.90


class ModelConfigMissing(KeyError):
    """No stored ``config.json`` facts for a model id."""


@cache
def model_config(model_id: str) -> dict:
    """The stored ``config.json`` fields for ``model_id`` (the text part for a multimodal model is
    under ``text_config``)."""
    path = CONFIGS / (model_id.replace("/", "--") + ".json")
    if not path.exists():
        raise ModelConfigMissing(f"no stored config.json facts for {model_id} (serve/model_configs/)")
    return json.loads(path.read_text())


@dataclass(frozen=True)
class Card:
    """A GPU as ``nvidia-smi`` reports its memory; ``desktop`` cards also drive a display."""

    label: str
    total_mib: int
    desktop: bool

    @property
    def total_bytes(self) -> int:
        return self.total_mib * 2**20

    def utilization(self) -> float:
        """The share of the card vLLM may take: 0.90, less on a desktop card so that
        :data:`DESKTOP_RESERVE` stays free for the display session."""
        if not self.desktop:
            return UTILIZATION_CAP
        return min(UTILIZATION_CAP, int((1 - DESKTOP_RESERVE / self.total_bytes) * 100) / 100)


CARDS: dict[str, Card] = {
    c.label: c
    for c in [
        # total memory as nvidia-smi prints it (MiB) for one common card of each size
        Card("8 GB", 8188, True),  # RTX 4060 / 3070
        Card("12 GB", 12288, True),  # RTX 3060 12GB / 4070
        Card("16 GB", 16376, True),  # RTX 4080 / 5070 Ti
        Card("24 GB", 24564, True),  # RTX 4090 / 3090
        Card("32 GB", 32607, True),  # RTX 5090
        Card("48 GB", 46068, False),  # L40S / RTX 6000 Ada
        Card("80 GB", 81559, False),  # H100 80GB / A100 80GB
        Card("141 GB", 143771, False),  # H200
    ]
}


def card_of_memory(gib: float, desktop: bool = False) -> Card:
    """A card of ``gib`` GiB (``--gpu-memory``), for cards not in :data:`CARDS`."""
    return Card(f"{gib:g} GiB", int(gib * 1024), desktop)


def _text(config: dict) -> dict:
    return config.get("text_config", config)


def _head_dim(t: dict) -> int:
    return t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"]


def parameters(config: dict) -> tuple[int, int]:
    """(parameters in quantizable linear layers, other parameters: embeddings, lm_head, norms, router,
    convolutions, vision tower) computed from the config's shapes."""
    attention, mlp, other = _parameter_parts(config)
    return attention + mlp, other


def _parameter_parts(config: dict) -> tuple[int, int, int]:
    """(attention and linear-attention projections, MLP/expert projections, the rest)."""
    t = _text(config)
    hidden, layers = t["hidden_size"], t["num_hidden_layers"]
    full, sliding, _window = kv_layers(config)
    query_width = 2 if t.get("attn_output_gate") else 1  # Qwen3.5's gated attention: q_proj emits a gate too
    attention = 0
    for count, (heads, hd), is_full in ((full, _full_kv(t), True), (sliding, _sliding_kv(t), False)):
        kv_projections = 1 if is_full and t.get("attention_k_eq_v") else 2  # Gemma 4's global K is its V
        q_and_o = hidden * t["num_attention_heads"] * hd * (1 + query_width)
        attention += count * (q_and_o + hidden * heads * hd * kv_projections)
    convolutions = 0
    if linear_layers(config):
        kh, kd, vh, vd = (
            t["linear_num_key_heads"],
            t["linear_key_head_dim"],
            t["linear_num_value_heads"],
            t["linear_value_head_dim"],
        )
        # Gated DeltaNet: q, k, v, the output gate z, and the b/a gates in; out_proj back
        attention += linear_layers(config) * (hidden * (2 * kh * kd + 2 * vh * vd + 2 * vh) + vh * vd * hidden)
        convolutions = linear_layers(config) * (2 * kh * kd + vh * vd) * t["linear_conv_kernel_dim"]
    if t.get("num_experts"):
        mlp = t["num_experts"] * 3 * hidden * t["moe_intermediate_size"]
        mlp += 3 * hidden * t.get("shared_expert_intermediate_size", 0)
        router = hidden * t["num_experts"]
    else:
        mlp, router = 3 * hidden * t["intermediate_size"], 0
    embeddings = t["vocab_size"] * hidden * (1 if t.get("tie_word_embeddings", True) else 2)
    other = embeddings + layers * (router + 4 * hidden) + convolutions + _vision_parameters(config, hidden)
    return attention, layers * mlp, other


def _vision_parameters(config: dict, text_hidden: int) -> int:
    v = config.get("vision_config")
    if not v:
        return 0
    h = v["hidden_size"]
    per_layer = 4 * h * h + 2 * h * v["intermediate_size"]
    return v["num_hidden_layers"] * per_layer + h * text_hidden


def weight_bytes(config: dict) -> int:
    """Bytes of the checkpoint's weights as vLLM loads them (linear layers as quantized; a GPTQ
    checkpoint whose ``dynamic`` rules exclude ``attn`` keeps its attention and linear-attention
    projections in 16 bits, as Qwen's own GPTQ-Int4 checkpoints do)."""
    attention, mlp, other = _parameter_parts(config)
    quant = config.get("quantization_config") or {}
    method = quant.get("quant_method")
    if method in ("awq", "gptq"):
        group = quant.get("group_size", 128)
        per_linear = quant.get("bits", 4) / 8 + 2.5 / group  # fp16 scale + packed zero per group
    elif method == "fp8":
        per_linear = 1.0 + 4 / (128 * 128)  # one float32 scale per 128x128 block
    else:
        per_linear = 2.0
    excluded = [rule for rule in quant.get("dynamic", {}) if rule.startswith("-:")] if method == "gptq" else []
    attention_bytes = attention * (2.0 if any("attn" in rule for rule in excluded) else per_linear)
    t = _text(config)
    shared = t["num_hidden_layers"] * 3 * t["hidden_size"] * t.get("shared_expert_intermediate_size", 0)
    shared_bytes = shared * (2.0 - per_linear) if any("shared_expert" in rule for rule in excluded) else 0
    return int(attention_bytes + mlp * per_linear + shared_bytes + other * 2)


def kv_dtype_bytes(kv_cache_dtype: str | None) -> int:
    return 1 if kv_cache_dtype and kv_cache_dtype.startswith("fp8") else 2


def _layer_types(t: dict) -> list[str]:
    """Each layer's kind: the config's ``layer_types``, else derived from ``full_attention_interval``
    (every Nth layer full attention, the rest linear, as transformers derives it), else none given."""
    if "layer_types" in t:
        return list(t["layer_types"])
    interval = t.get("full_attention_interval")
    if interval and t.get("linear_num_value_heads"):
        return [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(t["num_hidden_layers"])
        ]
    return []


def linear_layers(config: dict) -> int:
    """How many linear-attention (Gated DeltaNet) layers a hybrid model has: they keep a fixed-size
    state per sequence, no KV per token."""
    return sum(1 for kind in _layer_types(_text(config)) if kind == "linear_attention")


def kv_layers(config: dict) -> tuple[int, int, int | None]:
    """(full-attention layers, sliding-window layers, the window) from the config; a hybrid model's
    linear-attention layers are neither."""
    t = _text(config)
    layers = t["num_hidden_layers"]
    window = t.get("sliding_window") if t.get("use_sliding_window", True) else None
    kinds = _layer_types(t)
    if kinds:
        sliding = sum(1 for kind in kinds if kind == "sliding_attention")
    elif window and t.get("sliding_window_pattern"):
        sliding = layers - layers // t["sliding_window_pattern"]  # every Nth layer is global
    else:
        sliding = 0
    return layers - sliding - linear_layers(config), sliding, window if sliding else None


def linear_state_bytes(config: dict) -> int:
    """The recurrent state one sequence holds over every linear-attention layer, whatever its length
    (vLLM's Gated DeltaNet state shapes): a convolution state of (2 x key heads x key dim + value
    heads x value dim) x (kernel - 1) in the model's dtype, and a value heads x value dim x key dim
    state in ``mamba_ssm_dtype`` (float32 in Qwen3.5's configs; else the model's dtype)."""
    count = linear_layers(config)
    if not count:
        return 0
    t = _text(config)
    kh, kd, vh, vd = (
        t["linear_num_key_heads"],
        t["linear_key_head_dim"],
        t["linear_num_value_heads"],
        t["linear_value_head_dim"],
    )
    conv = (2 * kh * kd + vh * vd) * (t["linear_conv_kernel_dim"] - 1) * 2
    ssm = vh * vd * kd * (4 if t.get("mamba_ssm_dtype") == "float32" else 2)
    return count * (conv + ssm)


def _sliding_kv(t: dict) -> tuple[int, int]:
    """(KV heads, head dim) of a sliding-window layer (and of every layer of a uniform model)."""
    return t["num_key_value_heads"], _head_dim(t)


def _full_kv(t: dict) -> tuple[int, int]:
    """(KV heads, head dim) of a full-attention layer: Gemma 4's global layers have their own."""
    return t.get("num_global_key_value_heads") or t["num_key_value_heads"], t.get("global_head_dim") or _head_dim(t)


def kv_bytes_per_token(config: dict, kv_cache_dtype: str | None) -> tuple[int, int]:
    """KV bytes one token takes in one (full-attention, sliding-window) layer: K and V, each KV head x
    head dim x the KV dtype's bytes. Gemma 4's K-equals-V global layers are counted with both (vLLM's
    cache layout is not assumed to share them: an over-count, never an under-count)."""
    t = _text(config)
    size = kv_dtype_bytes(kv_cache_dtype)
    (full_heads, full_hd), (heads, hd) = _full_kv(t), _sliding_kv(t)
    return 2 * full_heads * full_hd * size, 2 * heads * hd * size


def kv_bytes_per_sequence(config: dict, tokens: int, kv_cache_dtype: str | None) -> int:
    """KV cache bytes one sequence of ``tokens`` holds (sliding-window layers capped at their window;
    linear-attention layers a fixed state, :func:`linear_state_bytes`)."""
    full, sliding, window = kv_layers(config)
    full_bytes, sliding_bytes = kv_bytes_per_token(config, kv_cache_dtype)
    return (
        full_bytes * full * tokens
        + sliding_bytes * sliding * min(tokens, window or tokens)
        + linear_state_bytes(config)
    )


def overhead_bytes(config: dict, card_bytes: int) -> int:
    """Activations of one prefill chunk (``max_num_batched_tokens``), the float32 logits of a full
    decoding batch (``max_num_seqs``), and the runtime reserve."""
    batched_tokens, max_num_seqs = server_defaults(card_bytes)
    t = _text(config)
    hidden = t["hidden_size"]
    experts = t.get("num_experts")
    inner = t["moe_intermediate_size"] * t["num_experts_per_tok"] if experts else t["intermediate_size"]
    activations = batched_tokens * (4 * hidden + 2 * inner) * 2
    logits = max_num_seqs * t["vocab_size"] * 4
    return activations + logits + RUNTIME_RESERVE


@dataclass(frozen=True)
class Fit:
    """One preset on one card: every term of the sum, per GPU."""

    card: Card
    utilization: float
    weights: int
    overhead: int
    kv_cache: int
    kv_per_token: int
    """KV bytes per token over every layer (full-attention layers, i.e. at long context)."""
    context: int
    sequences: float
    """How many sequences of ``context`` tokens the KV cache holds at once."""
    max_context: int
    """The longest single sequence the KV cache holds."""

    @property
    def starts(self) -> bool:
        return self.kv_cache > 0 and self.sequences >= 1

    def arithmetic(self) -> str:
        """The sum in one line, GiB."""
        budget = self.card.total_bytes * self.utilization
        head = (
            f"{self.card.total_bytes / GIB:.1f} GiB x {self.utilization:.2f} = {budget / GIB:.1f} GiB; "
            f"weights {self.weights / GIB:.1f} + overhead {self.overhead / GIB:.1f}"
        )
        short = self.weights + self.overhead - budget
        if short >= 0:
            return f"{head} exceed it by {short / GIB:.1f} GiB: no room for any KV cache"
        return (
            f"{head} leave {self.kv_cache / GIB:.1f} GiB of KV cache at {self.kv_per_token / 1024:.0f} KiB/token: "
            f"{self.sequences:.1f} sequence(s) of {self.context} tokens, one of at most {self.max_context}"
        )


def kv_share(config: dict, tensor: int) -> float:
    """The share of the KV cache one GPU holds under tensor parallelism: KV heads are split, and
    replicated when there are fewer heads than GPUs."""
    heads = _text(config)["num_key_value_heads"]
    return max(1, heads // tensor) / heads if tensor > 1 else 1.0


def fit(
    model_id: str,
    card: Card,
    *,
    context: int,
    kv_cache_dtype: str | None = None,
    utilization: float | None = None,
    tensor: int = 1,
) -> Fit:
    """What ``model_id`` holds on ``card`` (per GPU, its weights split over ``tensor`` GPUs)."""
    config = model_config(model_id)
    util = utilization if utilization is not None else card.utilization()
    weights = weight_bytes(config) // tensor
    overhead = overhead_bytes(config, card.total_bytes)
    kv = max(0, int(card.total_bytes * util) - weights - overhead)
    share = kv_share(config, tensor)
    full_bytes, sliding_bytes = (b * share for b in kv_bytes_per_token(config, kv_cache_dtype))
    full, sliding, window = kv_layers(config)
    per_sequence = kv_bytes_per_sequence(config, context, kv_cache_dtype) * share
    # what the sliding layers and the linear-attention state hold at any length
    bounded = sliding_bytes * sliding * (window or 0) + linear_state_bytes(config) * share
    longest = int((kv - bounded) // (full_bytes * full)) if kv > bounded and full else 0
    model_max = _text(config).get("max_position_embeddings") or longest
    return Fit(
        card=card,
        utilization=util,
        weights=weights,
        overhead=overhead,
        kv_cache=kv,
        kv_per_token=int(full_bytes * full + sliding_bytes * sliding),
        context=context,
        sequences=kv / per_sequence if per_sequence else 0.0,
        max_context=min(longest, model_max),
    )
