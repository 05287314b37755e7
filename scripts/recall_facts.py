"""The fact script of the recall benchmark: which facts are planted in which chapter, and which
later chapters need them (``scripts/bench_recall.py``).

A fact has a *needle*: the short distinguishing string (``"340 silver crowns"``) that a prompt
must carry verbatim for the writer to have it. Its *statement* is the sentence the author
plants in the chapter's prose and in its state update; a summary or digest that keeps the fact
repeats the statement. The outline names each fact's subject in the chapters that plant and
need it (the *cue*, never the needle), as a real outline says "the debt falls due" without the
sum. The script is a function of the chapter count alone, so every method that writes the same
number of chapters is asked for the same facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("eyes", "debt", "promise", "secret")
"""Where each kind lives in NstAgent's state: eyes in a character's facts, a promise as an open
requirement, a debt and a secret as past events (the part of the state a digest replaces)."""
CAST = (
    "Ada Venn",
    "Tobias Marr",
    "Elin Harrow",
    "Jonah Creel",
    "Maren Holt",
    "Silas Dunmore",
    "Ruth Galloway",
    "Pell Ashby",
)
DISTANCES = (1, 3, 8, 20)
"""A fact planted in chapter p is needed in chapters p+1, p+3, p+8 and p+20 (those that exist)."""
_SHADES = (
    "amber-flecked",
    "silver-ringed",
    "smoke-dark",
    "gold-rimmed",
    "sea-pale",
    "ash-flecked",
    "copper-bright",
    "frost-blue",
)
_HUES = ("green", "grey", "brown", "violet", "hazel", "blue")
_OBJECTS = ("logbook", "brass sextant", "tithe ledger", "signal lamp", "captain's seal", "chart case")
_PLACES = (
    "the chapel steps",
    "the north pier",
    "the lamp room floor",
    "the salt store",
    "the old ferry slip",
    "the net loft",
)
_MONTHS = ("March", "April", "May", "June", "July", "August", "September", "October")
_NOUNS = {"eyes": "eyes", "debt": "debt", "promise": "vow", "secret": "secret"}
_QUERIES = {
    "eyes": "eyes looked lamplight",
    "debt": "owed harbour master debt",
    "promise": "swore vow sail tide",
    "secret": "hid secret beneath",
}


@dataclass(frozen=True)
class Fact:
    key: str
    """A state key: lower_snake_case, unique in the story."""
    kind: str
    person: str
    planted: int
    needed: tuple[int, ...]
    needle: str
    statement: str

    @property
    def cue(self) -> str:
        """What the outline says of the fact where it is needed (no needle)."""
        return f"{self.person}'s {_NOUNS[self.kind]} matters again."

    @property
    def plant_cue(self) -> str:
        return f"{self.person} reveals a {_NOUNS[self.kind]}."

    @property
    def query(self) -> str:
        """What a writer that lacks the fact searches for."""
        return f"{self.person} {_QUERIES[self.kind]}"

    @property
    def mention(self) -> str:
        """A sentence of a needing chapter that names the subject without the detail (the fact unknown)."""
        return f"{self.person} thought again about the {_NOUNS[self.kind]}, and said nothing of it."


def _needle(kind: str, i: int) -> tuple[str, str]:
    """(needle, statement with a ``{who}`` slot) of the ``i``-th fact of ``kind``."""
    if kind == "eyes":
        needle = f"{_SHADES[i % len(_SHADES)]} {_HUES[(i // len(_SHADES)) % len(_HUES)]} eyes"
        return needle, f"{{who}} looked up, and the lamplight caught {needle} that no one on the island forgot."
    if kind == "debt":
        needle = f"{117 + 23 * i} silver crowns"
        return needle, f"{{who}} owed the harbour master {needle}, a debt that fell due before the winter tide."
    if kind == "promise":
        needle = f"{_MONTHS[i % len(_MONTHS)]} tide of {1880 + i}"
        return needle, f"{{who}} swore a vow to sail the drowned men home on the {needle}, whatever it cost."
    needle = f"{_OBJECTS[i % len(_OBJECTS)]} beneath {_PLACES[(i // len(_OBJECTS)) % len(_PLACES)]}"
    return needle, f"{{who}} kept a secret: they hid the {needle} on the night of the wreck."


def script(chapters: int) -> list[Fact]:
    """One fact planted in each chapter but the last, kinds and people in turn."""
    facts = []
    for planted in range(1, chapters):
        n = planted - 1
        kind, person = KINDS[n % len(KINDS)], CAST[n % len(CAST)]
        needle, statement = _needle(kind, n // len(KINDS))
        needed = tuple(planted + d for d in DISTANCES if planted + d <= chapters)
        slug = re.sub(r"[^a-z]+", "_", person.lower()).strip("_")
        facts.append(
            Fact(f"{kind}_{slug}_{planted}", kind, person, planted, needed, needle, statement.replace("{who}", person))
        )
    return facts


def planted_in(facts: list[Fact], chapter: int) -> list[Fact]:
    return [f for f in facts if f.planted == chapter]


def needed_in(facts: list[Fact], chapter: int) -> list[Fact]:
    return [f for f in facts if chapter in f.needed]
