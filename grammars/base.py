"""The base class every grammar derives from."""

from pydantic import BaseModel, ConfigDict


class Grammar(BaseModel):
    """A structured reply: closed (no additional properties).

    Rule for every grammar: bound the reply with ``max_tokens``, not with ``max_length``
    on strings. A bounded string becomes a counted repetition in the decoding regex, and
    its automaton grows with the bound: the demo sheet with two bounded strings took
    4.8 s to compile against SmolLM2's vocabulary instead of 0.7 s, and vLLM refuses
    grammars that take longer than ``VLLM_REGEX_COMPILATION_TIMEOUT_S`` (5 s by default).
    A test compiles every registered grammar and holds it to that budget.
    """

    model_config = ConfigDict(extra="forbid")
