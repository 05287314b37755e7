"""``fabula prompt``: one call to a model, free or constrained."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jsonschema
from pydantic import BaseModel

from agent.cli.checks import bounded_int, finite
from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, open_model
from agent.limits import TOKEN_CAP
from agent.text import read_capped
from agent.userinput import SEED_MAX


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "prompt",
        help="send one prompt to a model and print the reply",
        description="Send one prompt; with --schema or --grammar the reply is "
        "constrained and printed as a JSON object.",
    )
    parser.add_argument("text", help="the prompt ('-' reads standard input)")
    parser.add_argument("--system", metavar="S", help="a system message")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--schema", metavar="FILE.json", type=Path, help="constrain the reply to a JSON Schema")
    shape.add_argument("--grammar", metavar="NAME", help="constrain the reply to a registered grammar")
    parser.add_argument("--temperature", type=finite(0.0, 2.0), default=0.7, help="sampling temperature (default 0.7)")
    parser.add_argument(
        "--max-tokens",
        type=bounded_int(1, TOKEN_CAP),
        default=512,
        metavar="N",
        help="longest reply in tokens (default 512); a reply cut there is printed with a warning, exit 3",
    )
    parser.add_argument("--seed", type=bounded_int(0, SEED_MAX), metavar="N", help="sampling seed (default: none)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print usage and latency to stderr")
    add_model_options(parser)
    parser.set_defaults(handler=run)


CUT_EXIT = 3
"""``fabula prompt``'s exit code when the reply was cut at --max-tokens: printed, but incomplete."""


def load_output_type(args: argparse.Namespace):
    """Resolve --schema/--grammar before any model is loaded, so bad input fails fast."""
    if args.grammar:
        from grammars import get_grammar

        try:
            return get_grammar(args.grammar)
        except KeyError as exc:
            raise CLIError(str(exc.args[0])) from None
    if args.schema:
        from agent.llm import JsonSchema

        try:
            schema = json.loads(read_capped(args.schema, 1 << 20).decode("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise CLIError(f"cannot read schema file {args.schema}: {getattr(exc, 'strerror', None) or exc}") from exc
        except json.JSONDecodeError as exc:
            raise CLIError(f"schema file {args.schema} is not JSON: {exc}") from exc
        if not isinstance(schema, dict):
            raise CLIError(f"schema file {args.schema} must hold a JSON object")
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise CLIError(f"schema file {args.schema} is not a valid JSON Schema: {exc.message}") from exc
        return JsonSchema(schema, name=args.schema.stem.replace(".schema", "") or "output")
    return None


def run(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    if not text.strip():
        raise CLIError("the prompt is empty")
    if args.max_tokens < 1:
        raise CLIError("--max-tokens must be at least 1")
    if args.temperature < 0:
        raise CLIError("--temperature must be >= 0")
    output_type = load_output_type(args)
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": text}
    ]
    with open_model(args, constrained=output_type is not None) as llm:
        probe = getattr(llm, "probe", None)
        if args.verbose and probe is not None:
            print(f"[probe] {probe.summary()}", file=sys.stderr)
            for note in probe.degraded:
                print(f"[probe] degraded: {note}", file=sys.stderr)
        completion = llm.generate(
            messages,
            output_type,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            seed=args.seed,
            role="prompt",
        )
    if output_type is None:
        print(completion.text)
    else:
        value = completion.parsed
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        print(json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value)
    if args.verbose:
        u = completion.usage
        print(
            f"[{completion.model}] prompt={u.prompt_tokens} cached={u.cached_prompt_tokens} "
            f"completion={u.completion_tokens} finish={completion.finish_reason} "
            f"latency={completion.latency_s:.2f}s",
            file=sys.stderr,
        )
    if completion.finish_reason == "length":  # printed (it may be what was wanted), never passed off as whole
        print(
            f"fabula: warning: the reply was cut at --max-tokens {args.max_tokens} (finish_reason=length); it is "
            "incomplete (exit 3): raise --max-tokens for the whole reply",
            file=sys.stderr,
        )
        return CUT_EXIT
    return 0
