"""The Jinja2 environment of the view's templates (autoescaped; templates ship in the package)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from agent.errors import FabulaError

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


def _jinja2():
    try:
        import jinja2
    except ImportError as exc:  # an optional dependency: name the extra that brings it
        raise FabulaError(
            "the web view and the HTML export need Jinja2: run scripts/setup, or "
            "pip install -e '.[view]' in the fabula checkout"
        ) from exc
    return jinja2


@cache
def environment():
    jinja2 = _jinja2()
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, **context) -> str:
    return environment().get_template(name).render(**context)
