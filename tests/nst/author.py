"""The scripted author under the path the reference kit imports (``fab_front.py``: ``tests.nst.author``);
the code lives in :mod:`agent.testing.author`."""

from agent.testing.author import Author, gate_of

__all__ = ["Author", "gate_of"]
