"""The frozen plan: the planner's stages, the run's plan (stored, cached or new), its fit to the
context, a writer's edit of it."""
