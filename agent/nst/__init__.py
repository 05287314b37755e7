"""NstAgent (narrative state tracking) and its RollSum and Direct baselines.

``planner`` makes and caches the frozen outline; ``state`` holds the narrative state and its
prompt layout; ``tools`` and ``loop`` run one chapter's tool conversation; ``length`` is the
shared gate and token sizing; ``runner`` commits chapters through the run store;
``rollsum`` and ``direct`` are the baselines on the same plan, gate and word count.
"""
