"""Checking that a judge's quotes occur in the story (beyond the paper).

A judge that paraphrases or invents its evidence inflates CED; an instance whose quotes do not
occur in the text is dropped from the *verified* CED. The matcher is shared with NstAgent's
evidence check and lives in ``agent.quotes``.
"""

from agent.quotes import normalize, occurs

__all__ = ["normalize", "occurs"]
