"""Checking that a quote occurs in a text: one matcher for every evidence check.

The evaluation drops a judge's instance whose quotes do not occur in the story (a judge that
paraphrases or invents its evidence inflates CED; ``agent.quotes``), and NstAgent refuses
a state entry whose evidence quote does not occur in the accepted chapter
(``agent.nst.state``). Matching tolerates whitespace
(runs of spaces and line breaks) and typographic variants (curly vs straight quotes, dashes,
the ellipsis character), because a judge copying prose through JSON changes exactly those;
it does not tolerate changed words, case or elisions.
"""

from __future__ import annotations

import re
import unicodedata

_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2012": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
    }
)
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHY).replace("\u2026", "...")
    return _SPACE.sub(" ", text).strip()


def occurs(quote: str, normalized_text: str) -> bool:
    """Whether ``quote`` occurs in a text already passed through :func:`normalize`."""
    q = normalize(quote)
    return bool(q) and q in normalized_text
