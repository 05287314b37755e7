"""Readers of stored runs for people: statistics, costs, the state over time, batches, following a run live."""
