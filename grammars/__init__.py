"""Pydantic models of every structured reply fabula asks of a model, and their registry.

Each grammar forbids additional properties, so the JSON Schema handed to the decoder is
closed. The exported copies in ``grammars/schemas/`` are kept in sync by a test, so a
change to a model shows up in review as a change to its schema. Imports only pydantic.
Every module of this package is imported here, which registers its grammars: a new
module needs no edit of this file.
"""

import importlib
import pkgutil

from grammars.base import Grammar
from grammars.registry import all_grammars, export_schemas, get_grammar, register, schema_of

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in ("base", "registry"):
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Grammar", "all_grammars", "export_schemas", "get_grammar", "register", "schema_of"]
