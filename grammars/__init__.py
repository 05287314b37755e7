"""Pydantic models of every structured reply fabula asks of a model, and their registry.

Each grammar forbids additional properties, so the JSON Schema handed to the decoder is
closed. The exported copies in ``grammars/schemas/`` are kept in sync by a test, so a
change to a model shows up in review as a change to its schema. Imports only pydantic.
"""

from grammars.base import Grammar
from grammars.registry import all_grammars, export_schemas, get_grammar, register, schema_of

# Importing the modules that define grammars registers them.
from grammars import demo  # noqa: F401  isort: skip

__all__ = ["Grammar", "all_grammars", "export_schemas", "get_grammar", "register", "schema_of"]
