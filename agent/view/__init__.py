"""``fabula view``: a local, read-only web view of runs (story, state over time, call ledger,
judgments), and the same pages rendered into one self-contained HTML export.

It reads the store only, through read-only connections; it never writes to a run.
"""
