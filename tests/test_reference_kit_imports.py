"""The reference kit (``../shared/reference/nstagent/fab_front.py``) imports fabula's scripted author by
these paths; moving the author must not break the kit that proves the paper profile."""

import importlib
import re
from pathlib import Path

import pytest

KIT_IMPORTS = {
    "tests.nst.author_server": ("AuthorServer", "infer_role"),
    "tests.nst.author": ("Author", "gate_of"),
    "tests.probe_replies": ("probe_reply",),
}
FRONT = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "nstagent" / "fab_front.py"


@pytest.mark.parametrize("module", sorted(KIT_IMPORTS))
def test_the_kit_finds_the_scripted_author_where_it_looks(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in KIT_IMPORTS[module]:
        assert callable(getattr(loaded, name)), f"{module}.{name}"


def test_the_pinned_imports_are_the_kits_own() -> None:
    if not FRONT.exists():
        pytest.skip("the reference kit is not beside this checkout")
    found = dict(re.findall(r"from (tests\.[\w.]+) import ([\w, ]+)", FRONT.read_text()))
    assert {m: tuple(n.replace(" ", "").split(",")) for m, n in found.items()} == {m: n for m, n in KIT_IMPORTS.items()}


def test_the_scripted_authors_server_knows_the_paper_profiles_baseline_requests() -> None:
    """Over HTTP the scripted author infers a request's role from its text: the reference-shaped RollSum and
    Direct requests (``reference_prompts``) must be read as what they are, or the kit's traces mislabel them."""
    from agent.gate import Gate
    from agent.nst.baselines import reference_prompts
    from agent.nst.chapter.planned import PlannedChapter
    from agent.testing.author_server import infer_role

    gate = Gate.for_target(1000, 0.8, 1.2)
    item = PlannedChapter(1, "One", "Things happen.", 1000)
    bodies = {
        "rollsum_chapter": reference_prompts.chapter_messages("p", [item], "", item, gate),
        "rollsum_summary": reference_prompts.summary_messages("p", "", 1, "One", "Text."),
        "direct_story": reference_prompts.direct_messages("p", gate),
    }
    assert {role: infer_role({"messages": messages}) for role, messages in bodies.items()} == {r: r for r in bodies}
    retry = [
        *bodies["direct_story"],
        {"role": "assistant", "content": "A story."},
        {"role": "user", "content": "REJECTED"},
    ]
    assert infer_role({"messages": retry}) == "direct_story"
