"""Bring your own manuscript: read a book written elsewhere and store it as an ordinary run.

``read_text``, ``read_epub`` and ``read_docx`` turn a file into text (or, for an EPUB, its spine
items); ``split`` finds the chapters and what is not story (licence boilerplate, front matter, a
table of contents); ``importer`` writes the chapters through the store, as a written chapter is
committed, so every command that reads a run reads an imported one.
"""

from agent.manuscript.model import Manuscript, Piece
from agent.manuscript.reading import read_manuscript

__all__ = ["Manuscript", "Piece", "read_manuscript"]
