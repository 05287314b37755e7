"""The baselines on NstAgent's plan and gate: RollSum (rolling summary) and Direct (the whole story in one call)."""
