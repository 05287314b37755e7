"""Judge replies for ``fabula eval``: consistency (per category), criteria, scores, editorial.

Each consistency category has its own grammar whose ``subtype`` is a closed enum of only that
category's subtypes (NstAgent Table 7, ConStory-Bench names), so a judge cannot file an
instance under a subtype of another category or invent one. Strings are unbounded here and
bounded by ``max_tokens`` (see ``grammars.base``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grammars.base import Grammar
from grammars.registry import register

CATEGORIES: dict[str, tuple[str, ...]] = {
    "characterization": (
        "memory_contradictions",
        "knowledge_contradictions",
        "skill_power_fluctuations",
        "forgotten_abilities",
    ),
    "factual_detail": ("appearance_mismatches", "nomenclature_confusions", "quantitative_mismatches"),
    "narrative_style": ("perspective_confusions", "tone_inconsistencies", "style_shifts"),
    "timeline_plot": (
        "absolute_time_contradictions",
        "duration_contradictions",
        "simultaneity_contradictions",
        "causeless_effects",
        "causal_logic_violations",
        "abandoned_plot_elements",
    ),
    "world_building": ("core_rules_violations", "social_norms_violations", "geographical_contradictions"),
}
"""The five categories and their 19 subtypes, in Table 7's order."""

GLOBAL_SUBTYPES = frozenset({"abandoned_plot_elements"})
"""Checked over the whole story rather than only the terminal window (NstAgent B.2)."""


class _Instance(Grammar):
    exact_quote: str = Field(min_length=1, description="verbatim text of the earlier statement, copied exactly")
    quote_chapter: int = Field(ge=1, description="chapter number where exact_quote occurs")
    contradicting_quote: str = Field(min_length=1, description="verbatim text of the later passage that contradicts it")
    contradicting_chapter: int = Field(ge=1, description="chapter number where contradicting_quote occurs")
    explanation: str = Field(min_length=1, description="why the two passages cannot both be true")


class CharacterizationInstance(_Instance):
    subtype: Literal[
        "memory_contradictions", "knowledge_contradictions", "skill_power_fluctuations", "forgotten_abilities"
    ]


class FactualDetailInstance(_Instance):
    subtype: Literal["appearance_mismatches", "nomenclature_confusions", "quantitative_mismatches"]


class NarrativeStyleInstance(_Instance):
    subtype: Literal["perspective_confusions", "tone_inconsistencies", "style_shifts"]


class TimelinePlotInstance(_Instance):
    subtype: Literal[
        "absolute_time_contradictions",
        "duration_contradictions",
        "simultaneity_contradictions",
        "causeless_effects",
        "causal_logic_violations",
        "abandoned_plot_elements",
    ]


class WorldBuildingInstance(_Instance):
    subtype: Literal["core_rules_violations", "social_norms_violations", "geographical_contradictions"]


@register("judge_consistency_characterization")
class CharacterizationReport(Grammar):
    contradictions: list[CharacterizationInstance]


@register("judge_consistency_factual_detail")
class FactualDetailReport(Grammar):
    contradictions: list[FactualDetailInstance]


@register("judge_consistency_narrative_style")
class NarrativeStyleReport(Grammar):
    contradictions: list[NarrativeStyleInstance]


@register("judge_consistency_timeline_plot")
class TimelinePlotReport(Grammar):
    contradictions: list[TimelinePlotInstance]


@register("judge_consistency_world_building")
class WorldBuildingReport(Grammar):
    contradictions: list[WorldBuildingInstance]


CONSISTENCY_GRAMMARS: dict[str, type[Grammar]] = {
    "characterization": CharacterizationReport,
    "factual_detail": FactualDetailReport,
    "narrative_style": NarrativeStyleReport,
    "timeline_plot": TimelinePlotReport,
    "world_building": WorldBuildingReport,
}


# -- writing quality (WritingBench-style) ------------------------------------------------------
BAND_SCORES: tuple[str, ...] = ("1-2", "3-4", "5-6", "7-8", "9-10")


@register("judge_criterion")
class CriterionDesign(Grammar):
    """One query-specific criterion with its five scoring bands, in fixed score order.

    The judge designs the five criteria one call at a time (seeing the earlier ones): a single
    grammar for all five (35 strings) took 5.8 s to compile against SmolLM2's 49K vocabulary,
    over vLLM's default 5 s budget, and compile time grows with the vocabulary (Gemma: 262K).
    """

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    band_1_2: str = Field(min_length=1, description="what a response scoring 1-2 looks like")
    band_3_4: str = Field(min_length=1, description="what a response scoring 3-4 looks like")
    band_5_6: str = Field(min_length=1, description="what a response scoring 5-6 looks like")
    band_7_8: str = Field(min_length=1, description="what a response scoring 7-8 looks like")
    band_9_10: str = Field(min_length=1, description="what a response scoring 9-10 looks like")

    def as_criterion(self) -> dict[str, object]:
        """The stored shape: name, description and a list of {scores, description} bands."""
        texts = (self.band_1_2, self.band_3_4, self.band_5_6, self.band_7_8, self.band_9_10)
        return {
            "name": self.name,
            "description": self.description,
            "bands": [{"scores": s, "description": t} for s, t in zip(BAND_SCORES, texts, strict=True)],
        }


@register("judge_criterion_score")
class CriterionScore(Grammar):
    """One criterion scored 1-10; the reason comes first so the score follows from it."""

    reason: str = Field(min_length=1)
    score: int = Field(ge=1, le=10)


# -- Magnet's editorial annotations and rubric ------------------------------------------------
class StoryAnnotation(Grammar):
    category: Literal["logical_consistency", "thematic_coherence", "character_arcs"]
    quote: str = Field(description="the passage the note is about (verbatim), or empty for the whole story")
    note: str = Field(min_length=1)


@register("judge_editorial_story")
class StoryAnnotations(Grammar):
    annotations: list[StoryAnnotation]


class SectionAnnotation(Grammar):
    category: Literal["goal_conflict_outcome", "hook_and_close", "necessity"]
    quote: str
    note: str = Field(min_length=1)


@register("judge_editorial_section")
class SectionAnnotations(Grammar):
    annotations: list[SectionAnnotation]


class SentenceAnnotation(Grammar):
    sentence: int = Field(ge=1, description="number of the sentence the note is about")
    category: Literal["rhythm", "clarity", "syntax_variety"]
    note: str = Field(min_length=1)


@register("judge_editorial_sentences")
class SentenceAnnotations(Grammar):
    annotations: list[SentenceAnnotation]


@register("judge_rubric_story")
class StoryRubric(Grammar):
    logical_consistency: int = Field(ge=0, le=100)
    thematic_coherence: int = Field(ge=0, le=100)
    character_arcs: int = Field(ge=0, le=100)
    overall: int = Field(ge=0, le=100)


@register("judge_rubric_section")
class SectionRubric(Grammar):
    goal_conflict_outcome: int = Field(ge=0, le=100)
    hook_and_close: int = Field(ge=0, le=100)
    necessity: int = Field(ge=0, le=100)
    overall: int = Field(ge=0, le=100)


@register("judge_rubric_sentences")
class SentenceRubric(Grammar):
    rhythm: int = Field(ge=0, le=100)
    clarity: int = Field(ge=0, le=100)
    syntax_variety: int = Field(ge=0, le=100)
    overall: int = Field(ge=0, le=100)
