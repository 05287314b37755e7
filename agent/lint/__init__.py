"""``fabula lint``: a model-free reading of a book for the habits of machine prose.

``rules`` holds the stock-phrase rules (data, extendable by the writer's own file); ``habits`` measures
what no single phrase shows (phrases repeated across chapters, sentence openings, overused words, dialogue
tags); ``report`` runs both over a book's chapters and scores each chapter by flags per 1,000 words.
Nothing here calls a model, so a 100K-word book lints in seconds and the same text always lints the same.
"""

from agent.lint.report import BookReport, ChapterReport, Flag, lint_book
from agent.lint.rules import LintRules, load_rules

__all__ = ["BookReport", "ChapterReport", "Flag", "LintRules", "lint_book", "load_rules"]
