"""A run's story as a book: its sections and headings, and the Markdown, text, JSON, DOCX and EPUB files."""
