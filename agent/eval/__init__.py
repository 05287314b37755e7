"""Evaluation of stored runs (``fabula eval``): judges, metrics, statistics and reports.

Reads what the run store holds and never imports a pipeline. Judge replies are stored in
each judged run's database (``agent.store.judgments``), so every number in a report can be
recomputed without calling a model again.
"""
