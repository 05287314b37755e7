"""A run's story as a DOCX in standard manuscript format, the file a writer sends to an agent or editor.

The conventions (Shunn's "Proper Manuscript Format", which agents and editors expect): 12-point
Times New Roman, one-inch margins, double-spaced, paragraphs indented half an inch with no space
between them; a title page with the author's name top left, the word count (rounded, "about N
words") top right and the title and byline centred halfway down; a running header "Surname / TITLE /
page" on every later page; each chapter on a new page, its heading a third of the way down; "#" for
a scene break and "END" after the last chapter.
"""

from __future__ import annotations

import io
import re

from agent.store.errors import StoreError
from agent.store.export.book import Book, read_book
from agent.store.runstore import RunStore

FONT = "Times New Roman"
SCENE_BREAK = re.compile(r"^\s*(?:#|\*\s*\*\s*\*|\*{3,}|~{3,})\s*$")
"""A paragraph that is only a scene-break mark (#, * * *, ***, ~~~): written as a centred "#"."""


def _docx():
    try:
        import docx
    except ImportError as exc:  # an optional dependency: name the extra that brings it
        raise StoreError(
            "DOCX export needs python-docx: run scripts/setup, or pip install -e '.[manuscript]' in the fabula checkout"
        ) from exc
    return docx


def about(words: int) -> str:
    """The word count as a manuscript gives it: to the nearest 100 (the nearest 1,000 from 20,000 words)."""
    step = 1000 if words >= 20_000 else 100
    rounded = max(step, round(words / step) * step) if words >= 50 else words
    return f"about {rounded:,} words"


def surname(author: str) -> str:
    """The last word of the author's name (the running header's "Surname")."""
    words = re.sub(r"\(.*?\)", "", author).split()
    return words[-1] if words else author


def build(book: Book):
    """The ``docx.Document`` of ``book`` (not yet saved)."""
    docx = _docx()
    from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_BREAK, WD_LINE_SPACING
    from docx.shared import Inches, Pt

    document = docx.Document()
    document.core_properties.title = book.title
    document.core_properties.author = book.author
    normal = document.styles["Normal"]
    normal.font.name, normal.font.size = FONT, Pt(12)
    normal.element.rPr.rFonts.set(docx.oxml.ns.qn("w:eastAsia"), FONT)
    fmt = normal.paragraph_format
    fmt.line_spacing_rule = WD_LINE_SPACING.DOUBLE
    fmt.space_before = fmt.space_after = Pt(0)
    section = document.sections[0]
    for side in ("top_margin", "bottom_margin", "left_margin", "right_margin"):
        setattr(section, side, Inches(1))
    section.different_first_page_header_footer = True  # the title page has no running header
    _running_header(section.header.paragraphs[0], f"{surname(book.author)} / {book.title.upper()} / ")

    # the title page: contact block and word count on the first line, title and byline halfway down
    first = document.add_paragraph()
    first.paragraph_format.line_spacing_rule = WD_LINE_SPACING.SINGLE
    first.paragraph_format.tab_stops.add_tab_stop(Inches(6.5), alignment=2)  # a right tab at the margin
    first.add_run(f"{book.author}\t{about(book.words)}")
    for _ in range(10):
        document.add_paragraph().paragraph_format.line_spacing_rule = WD_LINE_SPACING.SINGLE
    title = document.add_paragraph(book.title)
    title.alignment = WD_ALIGN_PARAGRAPH.CENTER
    byline = document.add_paragraph(f"by {book.author}")
    byline.alignment = WD_ALIGN_PARAGRAPH.CENTER
    if book.series is not None:
        series = document.add_paragraph(f"Book {book.series[1]} of {book.series[0]}")
        series.alignment = WD_ALIGN_PARAGRAPH.CENTER

    for chapter in book.sections:
        document.add_paragraph().add_run().add_break(WD_BREAK.PAGE)  # each chapter on a new page
        for _ in range(6):  # a third of the way down the page
            document.add_paragraph().paragraph_format.line_spacing_rule = WD_LINE_SPACING.SINGLE
        heading = document.add_paragraph(chapter.heading, style="Heading 1")
        heading.alignment = WD_ALIGN_PARAGRAPH.CENTER
        _plain_heading(heading, Pt(12))
        for text in chapter.paragraphs:
            if SCENE_BREAK.match(text):
                document.add_paragraph("#").alignment = WD_ALIGN_PARAGRAPH.CENTER
                continue
            paragraph = document.add_paragraph(" ".join(text.split()))
            paragraph.paragraph_format.first_line_indent = Inches(0.5)
    document.add_paragraph("END").alignment = WD_ALIGN_PARAGRAPH.CENTER
    return document


def _plain_heading(paragraph, size) -> None:
    """A chapter heading in the body's font and size, black, double-spaced (a manuscript has no display type)."""
    from docx.enum.text import WD_LINE_SPACING
    from docx.shared import Pt, RGBColor

    paragraph.paragraph_format.line_spacing_rule = WD_LINE_SPACING.DOUBLE
    paragraph.paragraph_format.space_before = paragraph.paragraph_format.space_after = Pt(0)
    for run in paragraph.runs:
        run.font.name, run.font.size, run.font.bold = FONT, size, False
        run.font.color.rgb = RGBColor(0, 0, 0)


def _running_header(paragraph, text: str) -> None:
    """``text`` then the page number (a PAGE field), right-aligned."""
    from docx.enum.text import WD_ALIGN_PARAGRAPH
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    paragraph.alignment = WD_ALIGN_PARAGRAPH.RIGHT
    paragraph.add_run(text)
    run = paragraph.add_run()
    for kind, code in (("begin", None), (None, "PAGE"), ("end", None)):
        if kind:
            element = OxmlElement("w:fldChar")
            element.set(qn("w:fldCharType"), kind)
        else:
            element = OxmlElement("w:instrText")
            element.set(qn("xml:space"), "preserve")
            element.text = code
        run._r.append(element)


def export_docx(store: RunStore) -> bytes:
    """The DOCX file's bytes."""
    book = read_book(store)
    if not book.sections:
        raise StoreError(f"{store.run_dir} has no committed text yet")
    out = io.BytesIO()
    build(book).save(out)
    return out.getvalue()
