"""NstAgent (narrative state tracking) and its RollSum and Direct baselines.

``plan`` makes and caches the frozen outline; ``state`` holds the narrative state; ``chapter`` runs
one chapter's tool conversation (its prompt, tools, drafting under the gate and sizing);
``runner`` commits chapters through the run store; ``best_of`` adds drafts per chapter;
``baselines`` holds RollSum and Direct on the same plan, gate and word count; ``revise`` changes a
written book (derive, rewrite, reconcile, continue, sequel).
"""
