"""Magnet (personas to plot): character agents, a critic, a narrator and goal sequencing over
a structured world graph, one committed timestep at a time.

Modules: ``definition`` (the story TOML and its validation), ``story_schema`` (its JSON
Schema), ``world`` (variables as (subject, attribute), secrets, views, commit rule),
``settings`` (every knob, paper defaults), ``schemas`` (grammars narrowed per call),
``prompts``, ``roles`` (the four roles as bounded model calls), ``memory`` (recall and
recap), ``loop`` (one timestep, goal sequencing, chapters), ``ending`` (concluding goal, stop
at target), ``runner`` (the registered pipeline), ``baseline`` (the single-model baseline),
``history`` (commit history and graph export).
"""
