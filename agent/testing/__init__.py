"""Test doubles: a scripted model and a fake OpenAI-compatible server, for the tests, the benchmarks
and the repro simulation.

``scripted`` is the one scripted :class:`~agent.llm.base.LLM`; ``author`` and ``story_llm`` are the
scripted NstAgent author and Magnet cast built on it; ``server`` is the one fake HTTP server, whose
behaviour is a route per path (``hostile``, ``kinds`` and ``author_server`` are the behaviours the
tests share; ``replies`` builds what they send); ``ports`` finds free ports. Nothing here imports
pytest, so the product (``agent.repro.simulated``) and ``scripts/`` use it as the tests do. It sits on
``agent.llm`` and below, and in ``agent/`` only the repro simulation imports it (``tests/test_layering.py``).
"""
