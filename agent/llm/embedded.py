"""The ``embedded`` backend's transformers engine: transformers + Outlines in this process, on the
CPU, no server. It loads any local HF model folder; the default engine for the embedded GGUF is
llama.cpp (``agent.llm.embedded_llamacpp``), this one is what runs where llama.cpp is not installed
(``agent.llm.embedded_engines`` chooses).

We drive ``model.generate`` ourselves with an Outlines logits processor rather than going
through ``outlines.Generator``: that way every sampling setting (``min_new_tokens``, stop
strings, seed) is honoured, and token counts and the finish reason are exact. The costly
part of constrained decoding, compiling a schema into an index over the vocabulary, is
cached per schema for the life of the process.

A request that offers native ``tools`` is rendered and read back as text in the Hermes convention
(:mod:`agent.llm.tool_text`), decoded unconstrained, as a vLLM server with the hermes parser does.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from agent.llm.base import LLM, Request
from agent.llm.call_clock import CallClock
from agent.llm.constraints import Constraint
from agent.llm.context import TemplateCounter, TokenCounter
from agent.llm.local_decoding import (
    ConstraintIndexes,
    RunawayCheck,
    SentenceClose,
    hf_vocabulary,
    read_reply,
    refuse_min_tokens_with_schema,
    template_kwargs,
)
from agent.llm.sampling import Sampling
from agent.llm.string_cap import StringCap, StringCaps
from agent.llm.tool_text import chat_messages, read_tool_reply
from agent.llm.types import LLMError, RawReply, ThinkingMode, ToolCall, Usage


def _import_stack() -> tuple[Any, Any, Any]:
    try:
        import torch
        import transformers
        from outlines_core import Index
    except ImportError as exc:
        raise LLMError(
            f"the embedded backend needs '{exc.name}': "
            "run scripts/setup, or pip install -e '.[cpu]' in the fabula checkout"
        ) from exc
    return torch, transformers, Index


class EmbeddedLLM(LLM):
    """A local HF model folder (default: the embedded SmolLM2) with Outlines constraints."""

    backend = "embedded"
    engine = "transformers"

    def __init__(self, model: str | None = None, *, thinking: ThinkingMode = "auto") -> None:
        torch, transformers, _ = _import_stack()
        if model is None:
            from agent.weights.models import ensure_embedded_model

            path = ensure_embedded_model().path
        else:
            path = Path(model).expanduser()
            if not (path / "config.json").is_file():
                raise LLMError(f"embedded backend: {path} is not a local HF model folder (no config.json)")
        self.path = path
        super().__init__(path.name, thinking=thinking)
        self._torch = torch
        transformers.utils.logging.disable_progress_bar()
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        self.hf_model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        self.hf_model.eval()
        self._lock = threading.Lock()
        self._constraints = ConstraintIndexes(lambda: hf_vocabulary(self.tokenizer))
        self._caps = StringCaps(self._pieces, self._piece)

    @property
    def parameter_count(self) -> int | None:
        return sum(p.numel() for p in self.hf_model.parameters())

    @property
    def model_context(self) -> int | None:
        """The model config's ``max_position_embeddings``."""
        value = getattr(getattr(self.hf_model, "config", None), "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def token_counter(self) -> TokenCounter | None:
        """The model's own tokenizer and chat template, in process."""
        return TemplateCounter(self.tokenizer, name=f"{self.model} tokenizer (in process)")

    # -- constraints -----------------------------------------------------------------------
    def _index(self, constraint: Constraint):
        """Compile a constraint once per process; later calls with the same schema reuse it."""
        return self._constraints.index(constraint)

    def warm_up(self, constraint: Constraint) -> None:
        """Pay the one-time compile cost of a constraint now (benchmarks and servers)."""
        self._index(constraint)

    # -- generation --------------------------------------------------------------------------
    def _complete(self, request: Request) -> RawReply:
        torch = self._torch
        refuse_min_tokens_with_schema(request.min_tokens, request.constraint)
        prompt_ids = self.tokenizer.apply_chat_template(
            chat_messages(request.messages, request.tools),
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
            **template_kwargs(self.thinking),
        )["input_ids"]
        kwargs, processors = self._generation_kwargs(request)
        clock = CallClock()
        with self._lock:
            if request.constraint is not None:
                from outlines.backends.outlines_core import OutlinesCoreLogitsProcessor

                with clock.part("compile"):
                    index = self._index(request.constraint)
                processors.append(OutlinesCoreLogitsProcessor(index, "torch"))
                # after the penalties, so they never re-allow a token the grammar masked; the cap only narrows it
                cap = self._caps.for_request(request.sampling, request.constraint)
                if cap is not None:
                    processors.append(TorchStringCap(cap))
            from transformers import LogitsProcessorList

            first = FirstLogits()
            kwargs["logits_processor"] = LogitsProcessorList([first, *(clock.timed("mask", p) for p in processors)])
            runaway = None
            criteria: list[Any] = []
            if request.constraint is not None:
                runaway = RunawayStop(self.tokenizer, int(prompt_ids.shape[1]))
                criteria.append(runaway)
            if request.sampling.close_after_words:
                criteria.append(CloseStop(self.tokenizer, int(prompt_ids.shape[1]), request.sampling.close_after_words))
            if criteria:
                from transformers import StoppingCriteriaList

                kwargs["stopping_criteria"] = StoppingCriteriaList(criteria)
            if request.seed is not None:
                torch.manual_seed(request.seed)
            started = time.perf_counter()
            with torch.inference_mode():
                output = self.hf_model.generate(
                    input_ids=prompt_ids, attention_mask=torch.ones_like(prompt_ids), **kwargs
                )
            took = time.perf_counter() - started
        prefill = (first.at or started + took) - started
        clock.add("prefill", prefill)
        clock.add("decode", max(0.0, took - prefill - clock.seconds["mask"]))  # sampling included
        new_ids = output[0, prompt_ids.shape[1] :].tolist()
        text, finish_reason = self._read_output(request, new_ids, runaway)
        calls: tuple[ToolCall, ...] = ()
        if request.tools:
            text, finish_reason, calls = read_tool_reply(text, finish_reason, request.messages)
        return RawReply(
            text=text,
            finish_reason=finish_reason,
            usage=Usage(prompt_tokens=int(prompt_ids.shape[1]), completion_tokens=len(new_ids)),
            model=self.model,
            runaway=runaway is not None and runaway.stopped,
            timing=clock.timing(),
            tool_calls=calls,
        )

    def _pieces(self) -> list[bytes]:
        return [str(p).encode("utf-8") for p in self.tokenizer.batch_decode([[t] for t in range(len(self.tokenizer))])]

    def _piece(self, token: int) -> bytes:
        return str(self.tokenizer.decode([token])).encode("utf-8")

    def _generation_kwargs(self, request: Request) -> tuple[dict[str, Any], list[Any]]:
        """``generate``'s arguments for ``request`` and its logits processors (sampling controls)."""
        kwargs: dict[str, Any] = {"max_new_tokens": request.max_tokens, "pad_token_id": self._pad_id()}
        if request.temperature > 0:
            kwargs.update(do_sample=True, temperature=request.temperature, top_k=0, top_p=1.0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        if request.min_tokens:
            kwargs["min_new_tokens"] = request.min_tokens
        processors = sampling_kwargs(request.sampling, kwargs, sampled=request.temperature > 0)
        if request.stop:
            kwargs.update(stop_strings=request.stop, tokenizer=self.tokenizer)
        return kwargs, processors

    def _read_output(self, request: Request, new_ids: list[int], runaway: Any) -> tuple[str, str]:
        """The reply's text and finish reason from the generated token ids."""
        eos = self._eos_ids()
        content_ids = new_ids[:-1] if new_ids and new_ids[-1] in eos else new_ids
        text = self.tokenizer.decode(content_ids, skip_special_tokens=True)
        return read_reply(
            text,
            new_ids,
            eos_ids=eos,
            max_tokens=request.max_tokens,
            stop=request.stop,
            runaway_stopped=runaway is not None and runaway.stopped,
            close_after_words=request.sampling.close_after_words,
        )

    def _eos_ids(self) -> set[int]:
        ids = self.hf_model.generation_config.eos_token_id
        ids = set(ids if isinstance(ids, list) else [ids]) if ids is not None else set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.tokenizer.eos_token_id


class FirstLogits:
    """A pass-through logits processor that notes when the first logits arrive (the prefill's end)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.at is None:
            self.at = time.perf_counter()
        return scores


class RunawayStop:
    """A ``generate`` stopping criterion for structured replies: the shared
    :class:`~agent.llm.local_decoding.RunawayCheck` over the tokens generated so far."""

    def __init__(self, tokenizer: Any, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.check = RunawayCheck(lambda ids: tokenizer.decode(ids, skip_special_tokens=True))

    @property
    def stopped(self) -> bool:
        return self.check.stopped

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        new = int(input_ids.shape[1]) - self.prompt_tokens
        due = new > 0 and new % self.check.every == 0
        stopped = self.check(input_ids[0, self.prompt_tokens :].tolist()) if due else self.check.stopped
        return torch.full((int(input_ids.shape[0]),), stopped, dtype=torch.bool, device=input_ids.device)


class CloseStop:
    """A ``generate`` stopping criterion for prose under ``Sampling.close_after_words``: the shared
    :class:`~agent.llm.local_decoding.SentenceClose` after every token."""

    def __init__(self, tokenizer: Any, prompt_tokens: int, words: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.close = SentenceClose(words, lambda ids: tokenizer.decode(ids, skip_special_tokens=True))

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        closed = self.close(input_ids[0, self.prompt_tokens :].tolist())
        return torch.full((int(input_ids.shape[0]),), closed, dtype=torch.bool, device=input_ids.device)


def sampling_kwargs(sampling: Sampling, kwargs: dict[str, Any], *, sampled: bool) -> list[Any]:
    """Map ``sampling`` onto transformers' ``generate``: repetition_penalty and no_repeat_ngram_size
    are generate arguments (they act on greedy decoding too); top_p/top_k/min_p only when
    sampling; frequency and presence penalties (OpenAI semantics, no transformers equivalent)
    become a logits processor, returned for the caller's processor list."""
    given = sampling.given()
    for name in ("repetition_penalty", "no_repeat_ngram_size"):
        if name in given:
            kwargs[name] = given[name]
    if sampled:
        for name in ("top_p", "top_k", "min_p"):
            if name in given:
                kwargs[name] = given[name]
    if "frequency_penalty" in given or "presence_penalty" in given:
        return [
            _OccurrencePenalty(
                given.get("frequency_penalty", 0.0), given.get("presence_penalty", 0.0), prompt_length=None
            )
        ]
    return []


class TorchStringCap:
    """:class:`~agent.llm.string_cap.StringCap` as a transformers logits processor: it reads the
    tokens sampled since its last call from ``input_ids`` (one sequence)."""

    def __init__(self, cap: StringCap) -> None:
        self.cap, self.seen = cap, -1

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        length = int(input_ids.shape[1])
        if self.seen >= 0:  # only the tokens sampled since the last call, not the whole sequence
            for token in input_ids[0, self.seen :].tolist():
                self.cap.accept(int(token))
        self.seen = length
        if self.cap.closing():
            row = self.cap(None, scores[0].detach().to(torch.float32).cpu().numpy().copy())
            scores[0] = torch.from_numpy(row).to(scores.dtype)
        return scores


class _OccurrencePenalty:
    """OpenAI's frequency and presence penalties over the tokens generated so far."""

    def __init__(self, frequency: float, presence: float, *, prompt_length: int | None) -> None:
        self.frequency, self.presence, self.prompt_length = frequency, presence, prompt_length

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.prompt_length is None:
            self.prompt_length = int(input_ids.shape[1])
        generated = input_ids[:, self.prompt_length :]
        if generated.shape[1] == 0:
            return scores
        counts = torch.zeros_like(scores)
        counts.scatter_add_(1, generated, torch.ones_like(generated, dtype=scores.dtype))
        return scores - self.frequency * counts - self.presence * (counts > 0).to(scores.dtype)
