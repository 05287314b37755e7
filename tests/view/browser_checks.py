"""What the browser tests check on every page: axe-core's accessibility rules (vendored, injected
into the page, never fetched) and that the page itself does not scroll sideways."""

from __future__ import annotations

from pathlib import Path
from typing import Any

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
SERIOUS = ("serious", "critical")

RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.filter(v => ['serious', 'critical'].includes(v.impact)).map(v => ({
    id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}"""


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """The serious and critical axe-core violations of the page as it is now."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate(RUN_AXE)


def sideways(page: Any) -> int:
    """How far the page itself scrolls sideways (0: it fits; a table scrolling in its own box is fine)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
