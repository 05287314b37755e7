"""Preset sizes computed from each model's config.json (stored facts) and the card's memory: every GPU
preset holds at least two sequences of its context on the card it names, a card where it cannot start
is refused with the arithmetic, and the sums match the published sizes."""

from __future__ import annotations

import pytest

from agent.cli import main
from serve.presets import PRESETS, preset_fit
from serve.sizing import CARDS, GIB, kv_bytes_per_sequence, model_config, parameters, weight_bytes
from tests.fake_nvidia import install_fake_nvidia_smi

GPU_PRESETS = [name for name, p in PRESETS.items() if p.device == "gpu"]


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_every_gpu_preset_holds_two_sequences_of_its_context_on_the_card_it_names(name):
    preset = PRESETS[name]
    assert preset.sized_for in CARDS and preset.sized_for.split()[0] in preset.card, preset.card
    fit = preset_fit(preset)
    assert fit.starts and fit.sequences >= 2, fit.arithmetic()
    assert preset.max_model_len <= fit.max_context


@pytest.mark.parametrize(
    "model, billions",
    [
        # the parameter counts the model cards state
        ("Qwen/Qwen3-32B", 32.8),
        ("Qwen/Qwen3-14B", 14.8),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", 30.5),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", 235),
        ("Qwen/Qwen2.5-72B-Instruct", 72.7),
        ("google/gemma-3-27b-it", 27.4),
        ("google/gemma-4-31B-it", 30.7),
        ("google/gemma-3-4b-it", 4.3),
        ("Qwen/Qwen3-4B-Instruct-2507", 4.0),
    ],
)
def test_parameters_computed_from_the_config_match_the_model_cards(model, billions):
    assert sum(parameters(model_config(model))) / 1e9 == pytest.approx(billions, rel=0.02)


def test_the_kv_cache_of_one_qwen3_32b_sequence_is_the_issue_s_ten_gib():
    config = model_config("Qwen/Qwen3-32B")
    assert kv_bytes_per_sequence(config, 40960, None) == 64 * 2 * 8 * 128 * 2 * 40960  # 10.0 GiB
    assert kv_bytes_per_sequence(config, 40960, "fp8") * 2 == kv_bytes_per_sequence(config, 40960, None)
    assert weight_bytes(config) / GIB == pytest.approx(61.0, abs=0.1)


def test_gemma_sliding_window_layers_hold_only_their_window():
    config = model_config("google/gemma-3-27b-it")  # 62 layers: every 6th global, the rest a 1024 window
    per_layer = 2 * 16 * 128 * 2
    assert kv_bytes_per_sequence(config, 65536, None) == per_layer * (10 * 65536 + 52 * 1024)


def test_gemma4_global_layers_have_their_own_kv_heads_and_head_dim():
    from serve.sizing import kv_bytes_per_token

    config = model_config("google/gemma-4-31B-it")  # 10 global layers (4 KV heads x 512), 50 sliding (16 x 256)
    assert kv_bytes_per_token(config, None) == (2 * 4 * 512 * 2, 2 * 16 * 256 * 2)
    assert kv_bytes_per_sequence(config, 32768, None) == 8192 * 10 * 32768 + 16384 * 50 * 1024


def test_desktop_cards_leave_room_for_the_display_session():
    for card in CARDS.values():
        free = card.total_bytes * (1 - card.utilization())
        assert card.utilization() <= 0.90 and (not card.desktop or free >= 1.5 * GIB), card


def test_a_preset_sized_past_the_card_is_refused_with_the_arithmetic(capsys):
    assert main(["serve", "--preset", "qwen3-32b", "--dry-run", "--gpu-memory", "79.6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "preset qwen3-32b cannot start on a 79.6 GiB GPU" in err[0], err
    assert "weights 61.0 + overhead" in err[0] and "0.7 sequence(s) of 40960 tokens" in err[0]
    assert main(["serve", "--preset", "qwen3-32b-fp8", "--dry-run", "--gpu-memory", "79.6"]) == 0


def test_serve_sizes_the_preset_for_the_gpu_nvidia_smi_reports(monkeypatch, tmp_path, capsys):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: True)
    install_fake_nvidia_smi(tmp_path, monkeypatch, gpus=(("NVIDIA GeForce RTX 4090", 24564, 23000),))
    assert main(["serve", "--preset", "gemma3-27b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot start on a 24.0 GiB GPU" in err[0] and "exceed it by" in err[0], err


def test_models_prints_what_each_preset_holds_and_refuses_what_cannot_start(capsys):
    assert main(["models", "--gpu-memory", "24"]) == 0
    out = capsys.readouterr().out
    assert "Sizing per GPU on a 24 GiB card" in out
    sizing = out[out.index("Sizing per GPU") :]
    row = next(line for line in sizing.splitlines() if line.strip().startswith("qwen3-14b-awq "))
    assert "24 GiB" in row and "32768" in row
    assert "qwen3-32b: cannot start: 24.0 GiB x 0.90 = 21.6 GiB; weights 61.0" in out
    assert main(["models", "--gpu-memory", "0"]) == 2


def test_a_hybrid_model_holds_kv_only_in_its_full_attention_layers_and_a_fixed_state_in_the_linear_ones():
    from serve.sizing import kv_layers, linear_layers, linear_state_bytes

    config = model_config("Qwen/Qwen3.5-4B")  # 32 layers: every 4th full attention (4 KV heads x 256), 24 DeltaNet
    assert kv_layers(config) == (8, 0, None) and linear_layers(config) == 24
    # per DeltaNet layer: conv state (2 x 16 x 128 + 32 x 128) x 3 in bf16, recurrent state 32 x 128 x 128 in fp32
    state = 24 * ((2 * 16 * 128 + 32 * 128) * 3 * 2 + 32 * 128 * 128 * 4)
    assert linear_state_bytes(config) == state == 51_511_296
    assert kv_bytes_per_sequence(config, 32768, None) == 8 * 2 * 4 * 256 * 2 * 32768 + state
    assert (
        kv_bytes_per_sequence(config, 65536, None) - kv_bytes_per_sequence(config, 32768, None)
        == 8 * 2 * 4 * 256 * 2 * 32768
    )  # the state does not grow with the sequence


def test_a_hybrid_preset_s_concurrency_counts_one_state_per_sequence():
    preset = PRESETS["qwen3.5-27b"]  # 16 full-attention layers, 48 DeltaNet layers
    fit = preset_fit(preset)
    per_sequence = 16 * 2 * 4 * 256 * 2 * 131072 + 48 * ((2 * 16 * 128 + 48 * 128) * 3 * 2 + 48 * 128 * 128 * 4)
    assert fit.kv_per_token == 16 * 2 * 4 * 256 * 2
    assert fit.sequences == pytest.approx(fit.kv_cache / per_sequence)
    assert 2 <= fit.sequences < 3, fit.arithmetic()


def test_a_gptq_checkpoint_keeps_what_its_dynamic_rules_exclude_in_16_bits():
    from serve.sizing import _parameter_parts

    config = model_config("Qwen/Qwen3.5-35B-A3B-GPTQ-Int4")  # experts 4-bit; attention, DeltaNet, shared experts not
    attention, _mlp, _other = _parameter_parts(config)
    shared = 40 * 3 * 2048 * 512
    all_quantized = {**config, "quantization_config": {**config["quantization_config"], "dynamic": {}}}
    per_linear = 4 / 8 + 2.5 / 128
    assert weight_bytes(config) - weight_bytes(all_quantized) == pytest.approx(
        (attention + shared) * (2 - per_linear), abs=2
    )
    assert 19 * GIB < weight_bytes(config) < 21 * GIB
