"""Jump-forward decoding (``agent.llm.jump_forward``) on a small vocabulary of its own: the text a
grammar allows in one way only, as the tokenizer's tokens, the last one left to the model unless
the reply ends there; nothing where the next byte is a choice."""

from __future__ import annotations

import numpy as np
import pytest
from outlines_core import Index, Vocabulary

from agent.llm.jump_forward import ForcedText

PIECES = [chr(c) for c in range(32, 127)] + ['"verdict"', '":"', "ccept", "accept", "ver", "dict", '"}']
EOS = len(PIECES)


def tokenize(text: bytes) -> list[int]:
    """Longest match first, as a BPE vocabulary's merges roughly give."""
    ids, at, decoded = [], 0, text.decode()
    while at < len(decoded):
        piece = max((p for p in PIECES if decoded.startswith(p, at)), key=len)
        ids.append(PIECES.index(piece))
        at += len(piece)
    return ids


@pytest.fixture(scope="module")
def vocabulary():
    return Vocabulary(EOS, {piece: [i] for i, piece in enumerate(PIECES)})


def forced(index: Index) -> ForcedText:
    return ForcedText(index, [p.encode() for p in PIECES] + [b""], tokenize, {EOS})


def allowed(index: Index, state: int) -> np.ndarray:
    return np.asarray(index.get_allowed_tokens(state), dtype=np.intp)


def text(tokens: list[int]) -> str:
    return "".join(PIECES[t] for t in tokens)


def walk(index: Index, state: int, written: str) -> int:
    for token in tokenize(written.encode()):
        state = index.get_next_state(state, token)
    return state


def test_the_forced_text_runs_to_the_next_choice_in_the_tokenizers_tokens(vocabulary):
    index = Index(r'\{"verdict":"(accept|revise)"\}', vocabulary)
    start = index.get_initial_state()
    jump = forced(index)
    tokens = jump.tokens(start, allowed(index, start))
    assert tokens == tokenize(b'{"verdict":"')[:-1] and text(tokens) == '{"verdict":'  # the last '"': the model's
    after_a = walk(index, start, '{"verdict":"a')
    assert text(jump.tokens(after_a, allowed(index, after_a))) == 'ccept"}'  # complete: all, but not the end


def test_a_choice_of_bytes_or_the_end_forces_nothing(vocabulary):
    index = Index(r'\{[ ]?"verdict"[ ]?:[ ]?"(accept|revise)"\}', vocabulary)
    start = index.get_initial_state()
    jump = forced(index)
    assert jump.tokens(start, allowed(index, start)) == []  # "{", then a space or a quote: a choice
    after_quote = walk(index, start, '{"')
    assert text(jump.tokens(after_quote, allowed(index, after_quote))) == "verdict"  # of "ver", "dict", '"'
    choice = walk(index, start, '{"verdict":"')
    assert jump.tokens(choice, allowed(index, choice)) == []
    free = Index(r'"[a-z]*"', vocabulary)
    inside = walk(free, free.get_initial_state(), '"ab')
    assert forced(free).tokens(inside, allowed(free, inside)) == []  # a free string, or its end
