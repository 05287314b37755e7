"""Draft a structured reply's next tokens from what it already reads: prompt-lookup decoding.

Why: a tool call or a state update copies much of its prompt (an update's evidence is a passage of
the chapter, a world update names a character and an attribute from the state) and repeats its
own keys. A draft of the tokens that followed the latest earlier occurrence of the reply's last
few tokens is evaluated with the next token in one forward pass; the engine samples each position
in turn, as it would without drafts, and keeps a draft only while the sampled token equals it.
The sampling is unchanged; the logits of a pass of several tokens round differently from a pass
of one (up to 0.14 apart on SmolLM2-135M), so a reply may part from the one written without drafts
at a near tie. On 2 cores a pass of 4 tokens at a 5,000-token context costs 1.85 times a pass of
one; over 600-word small-profile NstAgent runs, their chapter turns decoded 1.23 times as fast
with drafts (docs/design/embedded-speed.md, the seventh round).
"""

from __future__ import annotations

from collections.abc import Sequence

LONGEST_MATCH = 4
"""The longest suffix of the text looked up (a longer match predicts better)."""
SHORTEST_MATCH = 2
"""The shortest: one token recurs too often to predict what follows (drafts after a single-token
match were thrown away 2.0-2.8 times a pass in the demo's calls, against 0.2-0.7 after two)."""
DRAFT_TOKENS = 4
"""The most tokens drafted a pass: each costs a sixth to a quarter of a one-token pass on 2 cores."""


class PromptLookup:
    """The drafter of one reply: an index of every ``SHORTEST_MATCH``..``LONGEST_MATCH``-gram of the
    prompt and the reply so far, by the position that follows its latest occurrence."""

    def __init__(self, prompt: Sequence[int]) -> None:
        self.text: list[int] = []
        self._after: dict[tuple[int, ...], int] = {}
        self.extend(prompt)

    def extend(self, tokens: Sequence[int]) -> None:
        """Read ``tokens`` on from the text so far."""
        for token in tokens:
            self.text.append(token)
            end = len(self.text) - 1
            # the n-grams ending before the last token: the suffix itself must find an earlier one
            for n in range(SHORTEST_MATCH, LONGEST_MATCH + 1):
                if end - n >= 0:
                    self._after[tuple(self.text[end - n : end])] = end

    def draft(self, room: int) -> list[int]:
        """Up to ``room`` (at most :data:`DRAFT_TOKENS`) tokens that followed the latest earlier
        occurrence of the longest suffix that recurs; none when no suffix of two tokens does."""
        size = min(room, DRAFT_TOKENS)
        if size <= 0:
            return []
        for n in range(LONGEST_MATCH, SHORTEST_MATCH - 1, -1):
            found = self._after.get(tuple(self.text[-n:])) if len(self.text) > n else None
            if found is not None:
                return self.text[found : found + size]
        return []
