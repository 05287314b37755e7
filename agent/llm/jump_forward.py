"""Jump-forward decoding: the text a grammar allows in one way only, as tokens to append unsampled.

A structured reply's keys, its punctuation and the rest of an enum value once its first token is
chosen leave the model no choice, yet token by token each costs a whole decode step. The llama.cpp
engine appends these tokens without sampling and evaluates them with the next sampled token in one
batch, which costs about as much as one step. Why: 25-40 % of a Magnet critic's reply is such
text (measured in docs/design/embedded-speed.md).

The text is found byte by byte on the grammar's index: a byte is forced when every token the index
allows starts with it (an end of sequence allowed is a choice, so it stops the text). The bytes
are then tokenized as the tokenizer would, and kept only if the index allows those tokens in turn.
The last of them is left to the model unless the reply is complete there: the tokenizer would
often merge it with the chosen text after it (``"`` and ``:`` as ``":``), and a model fed a
token it would not have written drifts (measured: a critic wrote ``"verdict" : "accept"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

SCAN_LIMIT = 256
"""States allowing more tokens than this are not examined: a free string allows tens of
thousands, and a forced byte's tokens are a handful of prefixes of the forced text."""


class ForcedText:
    """The forced continuation of a state of one grammar index, over one vocabulary.

    ``token_bytes``: each token id's bytes (empty for special tokens); ``tokenize``: bytes to the
    tokenizer's own ids (no BOS); ``end_ids``: the end-of-sequence tokens."""

    def __init__(
        self,
        index: Any,
        token_bytes: Sequence[bytes],
        tokenize: Callable[[bytes], list[int]],
        end_ids: set[int],
    ) -> None:
        self.index, self.tokenize, self.end_ids = index, tokenize, end_ids
        self.first = np.full(len(token_bytes), -1, dtype=np.int16)
        self.single: dict[int, int] = {}
        for token, data in enumerate(token_bytes):
            if data and token not in end_ids:
                self.first[token] = data[0]
                if len(data) == 1:
                    self.single.setdefault(data[0], token)

    def tokens(self, state: int, allowed: np.ndarray) -> list[int]:
        """The tokens of the text forced from ``state`` (``allowed``: the ids allowed there), or
        ``[]`` when the next byte is already the model's choice."""
        text = bytearray()
        at, ids = state, allowed
        while 0 < len(ids) <= SCAN_LIMIT and not self.end_ids.intersection(ids.tolist()):
            firsts = self.first[ids]
            byte = int(firsts[0])
            if byte < 0 or bool((firsts != byte).any()):
                break
            single = self.single.get(byte)
            step = self.index.get_next_state(at, single) if single is not None else None
            if step is None:
                break
            text.append(byte)
            at = step
            ids = np.asarray(self.index.get_allowed_tokens(at), dtype=np.intp)
        if not text:
            return []
        tokens = self.tokenize(bytes(text))
        walk: int | None = state
        for token in tokens:
            walk = self.index.get_next_state(walk, token)
            if walk is None:
                return []
        if walk != at:
            return []
        complete = self.end_ids.issuperset(self.index.get_allowed_tokens(at))
        return tokens if complete else tokens[:-1]
