"""The scripted author's server under the path the reference kit imports.

``../shared/reference/nstagent/fab_front.py`` (outside this repository, read-only) imports
``tests.nst.author_server``; the code lives in :mod:`agent.testing.author_server`.
"""

from agent.testing.author_server import AuthorServer, infer_role

__all__ = ["AuthorServer", "infer_role"]
