"""Numbers more than one part of fabula shares, each defined once.

Every pipeline, the store's readers and the CLI import these instead of writing their own
copy; a pipeline's own knobs stay in its settings.
"""

from __future__ import annotations

MIN_WORDS = 500
"""The shortest story a user may ask NstAgent's family for (``--words`` and ``--set words`` alike)."""
MAX_WORDS = 300_000
"""The longest story any pipeline is asked for (NstAgent's ``words``, a story definition's length)."""
TOKEN_CAP = 262_144
"""The largest token count a setting may name (a context length, a ``max_tokens``): 256 Ki, the
longest context of the models fabula targets."""
DEFAULT_PAGE_WORDS = 500
"""Words per page when a story definition gives its length in pages and says nothing else."""
MAX_PAGES = 600
MAX_PAGE_WORDS = 5_000

LATIN_TOKENS_PER_WORD = 1.4
CJK_TOKENS_PER_WORD = 1.5
"""NstAgent's family: the tokens-per-word prior of the first draft of a run (by the prompt's
script), replaced by the ratio measured on the model's own drafts from the second on. It errs
high so that a first draft has room to reach its gate."""
CLOSING_TOKENS_PER_WORD = 1.35
"""Magnet: sizes the closing paragraph's ``min_tokens``/``max_tokens`` from the words still
missing; never measured, so it is the typical ratio of English prose, not a prior that errs
high. The two differ on purpose (one is corrected after a draft, the other is not); unifying
them would change the requests Magnet sends for its last paragraph."""
REFERENCE_TOKENS_PER_WORD = 1.35
REFERENCE_TOKENS_PER_CJK = 0.85
"""The NstAgent reference's dynamic chapter budget (``turn_token_overhead``): tokens per word (per CJK
character) of a chapter's target, measured by its authors on Qwen3.5-4B tool calls (agent_core.py
``DEFAULT_DYNAMIC_TOKEN_RATIO_EN``/``_ZH``)."""
