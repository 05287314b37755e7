"""A written book changed after the fact: derive, re-derive, rewrite, reconcile, replan, continue,
sequel, lint fixes."""
