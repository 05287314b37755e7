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
