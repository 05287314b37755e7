"""Turn a Python output type into one backend-neutral constraint, and check replies against it.

Output types follow Outlines' idea of "plain Python types": a pydantic model class, a JSON
Schema dict, a :class:`Regex`, or a :class:`Choice` (a plain ``list[str]`` works too). Each
backend adapts the resulting :class:`Constraint` to its own wire format.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema
import pydantic

from agent.llm.bounds import enum_bounded
from agent.llm.types import OutputValidationError


@dataclass(frozen=True)
class Regex:
    """Constrain the reply to a full match of ``pattern``."""

    pattern: str


@dataclass(frozen=True)
class Choice:
    """Constrain the reply to exactly one of ``options``."""

    options: tuple[str, ...]

    def __init__(self, options: list[str] | tuple[str, ...]) -> None:
        if not options:
            raise ValueError("Choice needs at least one option")
        object.__setattr__(self, "options", tuple(options))


@dataclass(frozen=True)
class JsonSchema:
    """A raw JSON Schema with a name (the name travels to servers that want one)."""

    schema: dict[str, Any]
    name: str = "output"


OutputType = type[pydantic.BaseModel] | dict | JsonSchema | Regex | Choice | list | None


@dataclass(frozen=True)
class Constraint:
    """A backend-neutral constraint: what kind, its body, and how to validate a reply."""

    kind: Literal["json", "regex", "choice"]
    name: str
    json_schema: dict[str, Any] | None = None
    pattern: str | None = None
    options: tuple[str, ...] | None = None
    model: type[pydantic.BaseModel] | None = None

    @property
    def decoding_schema(self) -> dict[str, Any] | None:
        """The schema a decoder compiles: small integer ranges spelled out as an ``enum``
        (decoders that ignore ``minimum``/``maximum`` all enforce ``enum``); ``json_schema``
        itself stays the one replies are validated against."""
        return enum_bounded(self.json_schema) if self.json_schema is not None else None

    @property
    def cache_key(self) -> str:
        """A stable key: equal constraints share one compiled generator."""
        body = self.json_schema if self.kind == "json" else (self.pattern or list(self.options or ()))
        return f"{self.kind}:{json.dumps(body, sort_keys=True)}"

    def parse(self, text: str) -> Any:
        """Validate ``text`` against the constraint and return the parsed value.

        Constrained decoding should make this a formality; it runs anyway, because a
        server may ignore a constraint it does not understand and still answer 200.
        """
        if self.kind == "regex":
            if re.fullmatch(self.pattern or "", text) is None:
                raise OutputValidationError(f"reply does not match /{self.pattern}/: {text[:80]!r}")
            return text
        if self.kind == "choice":
            if text not in (self.options or ()):
                raise OutputValidationError(f"reply {text[:80]!r} is not one of {list(self.options or ())}")
            return text
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OutputValidationError(f"reply for {self.name} is not JSON ({exc}): {text[:80]!r}") from exc
        except RecursionError:
            raise OutputValidationError(f"reply for {self.name} is JSON nested too deeply: {text[:80]!r}") from None
        if self.model is not None:
            try:
                return self.model.model_validate(data)
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(root)"
                raise OutputValidationError(f"{self.name}: {where}: {first['msg']}") from exc
        try:
            jsonschema.validate(data, self.json_schema or {})
        except jsonschema.ValidationError as exc:
            raise OutputValidationError(f"{self.name}: {exc.message}") from exc
        return data


def to_constraint(output_type: OutputType) -> Constraint | None:
    """Normalise any accepted output type into a :class:`Constraint` (``None`` = free text)."""
    if output_type is None:
        return None
    if isinstance(output_type, type) and issubclass(output_type, pydantic.BaseModel):
        return Constraint(
            kind="json",
            name=output_type.__name__,
            json_schema=output_type.model_json_schema(),
            model=output_type,
        )
    if isinstance(output_type, JsonSchema):
        jsonschema.Draft202012Validator.check_schema(output_type.schema)
        return Constraint(kind="json", name=output_type.name, json_schema=output_type.schema)
    if isinstance(output_type, dict):
        jsonschema.Draft202012Validator.check_schema(output_type)
        name = str(output_type.get("title") or "output")
        return Constraint(kind="json", name=_safe_name(name), json_schema=output_type)
    if isinstance(output_type, Regex):
        re.compile(output_type.pattern)
        return Constraint(kind="regex", name="regex", pattern=output_type.pattern)
    if isinstance(output_type, Choice):
        return Constraint(kind="choice", name="choice", options=output_type.options)
    if isinstance(output_type, list | tuple) and all(isinstance(o, str) for o in output_type):
        return to_constraint(Choice(list(output_type)))
    raise TypeError(f"unsupported output type: {output_type!r}")


def _safe_name(name: str) -> str:
    """OpenAI-style schema names allow only ``[A-Za-z0-9_-]``, at most 64 characters."""
    return (re.sub(r"[^A-Za-z0-9_-]", "_", name) or "output")[:64]
