"""A story bible: the writer's world (characters with canon facts, places, rules, timeline, must-happen
requirements), read from TOML, YAML or Markdown, checked line by line, and turned into a narrative state."""
