"""The writer's hand on a run: edits and their versions, plan edits, locked chapters, reviews."""
