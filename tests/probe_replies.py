"""The capability probe's replies under the path the reference kit imports (``fab_front.py``:
``tests.probe_replies``); the code lives in :mod:`agent.testing.replies`."""

from agent.testing.replies import probe_reply

__all__ = ["probe_reply"]
