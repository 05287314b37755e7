"""fabula's agent package: the LLM layer, the run store and the two story pipelines.

Imports flow downwards only: pipelines use ``agent.llm`` and ``grammars``; ``agent.llm``
knows nothing of the pipelines.
"""
