"""A writer's voice: measuring a text's style against a sample, the style card, the exemplar passages."""
