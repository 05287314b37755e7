"""Which engine runs the ``embedded`` backend: llama.cpp where it is installed, transformers
otherwise, chosen here once for every caller (the CLI's model options, the Python API, the
tests' fixture).

- the embedded default: llama.cpp on its GGUF, re-encoded once as Q8_0 (``agent.weights.fast_gguf``),
  with its HF folder's tokenizer (so prompts are token for token those of the transformers
  engine), or the GGUF's own on the light install (``fabula[embedded]``, no transformers); else
  transformers on the HF folder, with one line saying why it is slower;
- ``--model path.gguf``: llama.cpp (a GGUF has no other engine here);
- ``--model path/to/hf-folder``: transformers (the folder's weights are what it holds).

``engine`` (``FABULA_EMBEDDED_ENGINE``, or the config file's ``embedded_engine``) forces one:
``llama.cpp`` or ``transformers``; ``auto`` is the rule above.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.llm.base import LLM
from agent.llm.embedded_llamacpp import llamacpp_available
from agent.llm.types import EMBEDDED_ENGINES as ENGINES
from agent.llm.types import LLMError, ThinkingMode

FALLBACK_NOTICE = (
    "fabula: llama-cpp-python is not installed, so the embedded model runs on transformers "
    "(several times slower); run scripts/setup to build it once"
)
_noticed = False


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise LLMError(f"unknown embedded engine {engine!r}: use one of {', '.join(ENGINES)}")
    return engine


def open_embedded(model: str | None = None, *, thinking: ThinkingMode = "auto", engine: str = "auto") -> LLM:
    """Open the embedded backend on ``model`` (``None``: the embedded default) with ``engine``."""
    check_engine(engine)
    if model is not None and Path(model).expanduser().suffix.lower() == ".gguf":
        if engine == "transformers":
            raise LLMError("the transformers engine cannot load a GGUF file: give its HF folder, or use llama.cpp")
        return _llamacpp(Path(model), None, thinking)
    if model is not None:
        if engine == "llama.cpp":
            raise LLMError("the llama.cpp engine loads a .gguf file; an HF folder runs on the transformers engine")
        return _transformers(model, thinking)
    if engine == "transformers" or (engine == "auto" and not llamacpp_available()):
        if engine == "auto":
            _notice_once()
        return _transformers(None, thinking)
    from agent.weights.fast_gguf import ensure_fast_gguf
    from agent.weights.models import ensure_embedded_model, ensure_gguf

    # the light install (fabula[embedded]: no transformers) reads prompts with the GGUF's own tokenizer
    # and template; with transformers, the HF folder's, token for token those of the transformers engine
    folder = ensure_embedded_model().path if transformers_available() else None
    return _llamacpp(ensure_fast_gguf() or ensure_gguf(), folder, thinking)


def transformers_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("transformers") is not None


def _llamacpp(gguf: Path, tokenizer_dir: Path | None, thinking: ThinkingMode) -> LLM:
    from agent.llm.embedded_llamacpp import LlamaCppLLM

    return LlamaCppLLM(gguf, tokenizer_dir=tokenizer_dir, thinking=thinking)


def _transformers(model: str | None, thinking: ThinkingMode) -> LLM:
    from agent.llm.embedded import EmbeddedLLM

    return EmbeddedLLM(model, thinking=thinking)


def _notice_once() -> None:
    global _noticed
    if not _noticed:
        print(FALLBACK_NOTICE, file=sys.stderr)
        _noticed = True
