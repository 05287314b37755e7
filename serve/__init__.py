"""Hosting models: where the embedded default comes from, the serving presets, and the
launcher that runs vLLM's OpenAI-compatible server. Imports nothing from ``agent``."""
