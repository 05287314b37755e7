"""The longest JSON string a structured reply may write (``Sampling.max_string_chars``).

A small model's structured reply that fails mostly fails inside one string: an update's
"relationships" that turns into a page of prose, a search query that becomes timestamps, until
``max_tokens`` cuts the whole reply (docs/design/embedded-speed.md). A ``maxLength`` in the
grammar would stop it, but counted repetition makes an Outlines index take seconds to minutes to
compile. So the in-process engines keep the grammar as it is and close the string at decode
time: once a string holds ``limit`` characters, only tokens the grammar allows that begin with
the closing quote may follow. A server is not asked for it (``EndpointLLM.applied_sampling``): as
``maxLength`` in the schema, vLLM's Outlines backend (the CPU preset's) gave up compiling the
small profile's turn grammar after its 30 s limit, and the request failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from agent.llm.constraints import Constraint
from agent.llm.sampling import Sampling

QUOTE, BACKSLASH, COMMA, OPEN_OBJECT = 0x22, 0x5C, 0x2C, 0x7B


class JsonStrings:
    """Where a JSON text is, byte by byte: inside a string or not, how many characters the current
    string holds (an escape counts as one, a UTF-8 character as one), and the object key a value
    string belongs to (an array's strings belong to the array's key; a key string to none)."""

    def __init__(self) -> None:
        self.inside = False
        self.escaped = False
        self.length = 0
        self.key: str | None = None
        """The key of the current value string (``None`` inside a key, or outside any object)."""
        self._containers = bytearray()
        self._expect_key = False
        self._in_key = False
        self._last_key: str | None = None
        self._key_bytes = bytearray()

    def feed(self, piece: bytes) -> None:
        for byte in piece:
            if not self.inside:
                self._structural(byte)
            elif self.escaped:
                self.escaped, self.length = False, self.length + 1
                self._key_byte(byte)
            elif byte == BACKSLASH:
                self.escaped = True
                self._key_byte(byte)
            elif byte == QUOTE:
                self.inside = False
                if self._in_key:
                    self._last_key, self._in_key = self._key_bytes.decode("utf-8", "replace"), False
            else:
                if byte & 0xC0 != 0x80:  # not a UTF-8 continuation byte
                    self.length += 1
                self._key_byte(byte)

    def _structural(self, byte: int) -> None:
        if byte == QUOTE:
            self.inside, self.escaped, self.length = True, False, 0
            self._in_key = self._expect_key
            self._expect_key = False
            self._key_bytes.clear()
            self.key = None if self._in_key else self._last_key
        elif byte in b"{[":
            self._containers.append(byte)
            self._expect_key = byte == OPEN_OBJECT
        elif byte in b"}]":
            if self._containers:
                self._containers.pop()
            self._expect_key = False
        elif byte == COMMA:
            self._expect_key = bool(self._containers) and self._containers[-1] == OPEN_OBJECT

    def _key_byte(self, byte: int) -> None:
        if self._in_key:
            self._key_bytes.append(byte)

    def full(self, limit: int) -> bool:
        """The current string holds ``limit`` characters and may be closed now (no escape open)."""
        return self.inside and not self.escaped and self.length >= limit


def closing_tokens(pieces: Sequence[bytes]) -> np.ndarray:
    """For each token id, whether its text begins with the quote that closes a string."""
    return np.fromiter((piece[:1] == b'"' for piece in pieces), dtype=bool, count=len(pieces))


class StringCap:
    """A logits processor (the llama.cpp engine's shape: numpy scores, told each sampled token):
    once the current string is full (``by_key``'s limit for a value under that key, else
    ``limit``; ``None``: no limit), every token that does not close it is masked. It runs after
    the grammar mask and only narrows it; where the grammar allows no closing token yet (a string
    under its ``minLength`` or ``pattern``), it leaves the scores alone."""

    def __init__(
        self,
        limit: int | None,
        closes: np.ndarray,
        piece: Callable[[int], bytes],
        by_key: Mapping[str, int | None] | None = None,
    ) -> None:
        self.limit, self.closes, self.piece = limit, closes, piece
        self.by_key: Mapping[str, int | None] = by_key or {}
        self.strings = JsonStrings()

    def current_limit(self) -> int | None:
        """The limit of the string being written."""
        key = self.strings.key
        return self.by_key[key] if key is not None and key in self.by_key else self.limit

    def closing(self) -> bool:
        """The string being written is full: only its closing quote may follow."""
        limit = self.current_limit() if self.strings.inside else None
        return limit is not None and self.strings.full(limit)

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        if self.closing():
            size = min(scores.shape[0], self.closes.shape[0])
            keep = np.zeros(scores.shape[0], dtype=bool)
            keep[:size] = self.closes[:size] & np.isfinite(scores[:size])
            if keep.any():
                scores[~keep] = -np.inf
        return scores

    def accept(self, token: int) -> None:
        self.strings.feed(self.piece(token))


class StringCaps:
    """An engine's caps: its vocabulary's closing tokens, found once on first use (a pass over the
    vocabulary), and a :class:`StringCap` for each request that asks for one."""

    def __init__(self, pieces: Callable[[], Sequence[bytes]], piece: Callable[[int], bytes]) -> None:
        self.pieces, self.piece = pieces, piece
        self._closes: np.ndarray | None = None

    def for_request(self, sampling: Sampling, constraint: Constraint | None) -> StringCap | None:
        """The cap ``sampling`` asks for, on a JSON constraint; ``None`` otherwise."""
        limit, by_key = sampling.max_string_chars, sampling.max_string_chars_by_key
        if (limit is None and not by_key) or constraint is None or constraint.kind != "json":
            return None
        if self._closes is None:
            self._closes = closing_tokens(self.pieces())
        return StringCap(limit, self._closes, self.piece, by_key)
