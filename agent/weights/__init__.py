"""Model weights on this machine: FABULA_HOME, the embedded model's files, GGUF headers."""
