"""Best of N (``--drafts N``): more drafts of each committed chapter and the rule or judge that chooses one."""
