"""The base class every grammar derives from."""

from pydantic import BaseModel, ConfigDict


class Grammar(BaseModel):
    """A structured reply: closed (no additional properties), strings kept as written."""

    model_config = ConfigDict(extra="forbid")
