"""Runs made from runs: forks, extensions with new chapters, the books of a series."""
