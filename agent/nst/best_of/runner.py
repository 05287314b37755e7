"""Best of N (``--drafts N``): more drafts of each chapter, one chosen by a stated rule, the others kept.

After the chapter loop commits its chapter (draft 1, whose state the loop derived), N-1 more drafts are
written from the same context (the system prompt, the story prompt, the outline, the state before the
chapter, its task and gate), each through the gate, at once on a server (as many as its client sends
together, ``at_once`` in the record; one after another in process). With ``--drafts-judge`` the run's own
model chooses (``agent.nst.best_of.judge``: one constrained call with the outline item, the state before
the chapter and the drafts; its one-line reason kept). Without it, or when the judge's reply cannot be
used, the model-free rule (``RULE``): a draft inside the gate before one outside it; then the lowest lint
score (``agent.lint``: flags of machine prose per 1,000 words); then the nearest to the target length;
then the earliest. When another draft than the first wins it is stored as the chapter's next version and
its state re-derived (one update call); every draft stays in the run (``DRAFTS_OF``, with the choice, its
rule and reason, and what the extra drafts and the judge cost) for ``fabula revise RUN --chapter N
--use-draft K``. The setting and the drafts are plan records, not configuration: how many drafts to
compare does not change a resumed run's settings. Each draft is stored as soon as it is written, so an
interrupted run loses none.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from agent.errors import InputError
from agent.lint import lint_book
from agent.nst.best_of.judge import judge_drafts
from agent.nst.chapter.drafter import Drafter, GateOutcome, draft_until_gate, record_attempt
from agent.nst.chapter.planned import Plan
from agent.nst.chapter.prompt import chapter_prompt, prose_request, system_prompt
from agent.nst.chapter.rederive import rederive_nst
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.config import NstConfig
from agent.nst.revise.rewrite import REVISE_ATTEMPTS
from agent.nst.state import NarrativeState
from agent.pipelines import Rederived
from agent.run_context import RunContext
from agent.store import RunStore, StoreError
from agent.store.snapshots import ChapterSnapshot

DRAFTS_KEY = "drafts"
"""The setting: ``{"n": N, "from": first chapter}``, with ``"judge": true`` when the run's model chooses."""
DRAFTS_OF = "drafts_of"
"""Per chapter (as a string key): the drafts, the one chosen, the rule and what the extra drafts cost."""
JUDGE_RULE = "the judge (the run's own model)"
RULE = "inside the gate first, then the lowest lint score, then the nearest to the target length, then the earliest"


def drafts_wanted(store: RunStore) -> int:
    record = store.plans.get(DRAFTS_KEY)
    return int(record.get("n", 1)) if isinstance(record, dict) else 1


def drafts_from(store: RunStore) -> int:
    """The first chapter written with drafts (a run given ``--drafts`` later redrafts none before it)."""
    record = store.plans.get(DRAFTS_KEY)
    return int(record.get("from", 1)) if isinstance(record, dict) else 1


def judged(store: RunStore) -> bool:
    """The run's model chooses among the drafts (``--drafts-judge``)."""
    record = store.plans.get(DRAFTS_KEY)
    return isinstance(record, dict) and bool(record.get("judge"))


def drafts_of(store: RunStore, index: int) -> dict[str, Any] | None:
    records = store.plans.get(DRAFTS_OF)
    record = records.get(str(index)) if isinstance(records, dict) else None
    return record if isinstance(record, dict) else None


def pending_drafts(store: RunStore, index: int) -> bool:
    """Chapter ``index`` is committed but its drafts are not all written and chosen yet."""
    if index < drafts_from(store):
        return False
    record = drafts_of(store, index)
    return record is None or "chosen" not in record


def choice_lines(store: RunStore) -> list[str]:
    """What ``fabula show`` says of a best-of-N run: per chapter, the draft chosen, by which rule, why, and
    what the extra drafts (and the judge) cost."""
    records = store.plans.get(DRAFTS_OF)
    if not isinstance(records, dict):
        return []
    lines = []
    for key in sorted(records, key=lambda k: int(k) if k.isdigit() else 0):
        record = records[key]
        if not isinstance(record, dict) or "chosen" not in record:
            continue
        why = f": {record['reason']}" if record.get("reason") else ""
        lines.append(
            f"chapter {key}: draft {record['chosen']} of {len(record.get('drafts', []))} by "
            f"{record.get('rule')}{why} ({record.get('calls', 0)} calls, "
            f"{record.get('completion_tokens', 0)} completion tokens for the extra drafts)"
        )
    return lines


def _save(store: RunStore, index: int, record: dict[str, Any]) -> None:
    records = store.plans.get(DRAFTS_OF)
    records = records if isinstance(records, dict) else {}
    store.plans.put(DRAFTS_OF, {**records, str(index): record})


def _messages(
    config: NstConfig, plan: Plan, state: NarrativeState | None, index: int, title: str
) -> list[dict[str, str]]:
    item = plan.chapter(index)
    gate = config.gate(item.target_words)
    return [
        {"role": "system", "content": system_prompt(with_state=False)},
        {
            "role": "user",
            "content": chapter_prompt(
                story_prompt=config.prompt,
                outline=plan.chapters,
                state=state,
                completed=index - 1,
                chapter=item,
                gate=gate,
                lookback=False,
            )
            + "\n\n"
            + prose_request(index, title, gate),
        },
    ]


def score(drafts: list[dict[str, Any]], target: int) -> list[dict[str, Any]]:
    """Each draft's lint score, each linted alone (alternatives share most phrases; that is no repetition)."""
    return [
        {**d, "lint": lint_book([(f"draft {d['k']}", d["text"])]).score, "distance": abs(d["words"] - target)}
        for d in drafts
    ]


def choose(drafts: list[dict[str, Any]]) -> int:
    """The draft the rule (``RULE``) picks: its ``k``."""
    return min(drafts, key=lambda d: (not d["in_gate"], d["lint"], d["distance"], d["k"]))["k"]


def best_of(ctx: RunContext[NstConfig], index: int, n: int) -> Rederived | None:
    """Write the missing drafts of committed chapter ``index``, choose one, store it if it is not the
    committed one (its state re-derived). None when the committed draft stays."""
    store, config = ctx.store, ctx.config
    chapter = store.chapter(index)
    if chapter is None:
        raise StoreError(f"chapter {index} does not exist")
    plan = Plan.of(store.plans.all())
    gate = config.gate(plan.chapter(index).target_words)
    record = drafts_of(store, index) or {
        "n": n,
        "drafts": [
            {
                "k": 1,
                "text": chapter.text,
                "words": chapter.words,
                "in_gate": gate.accepts(chapter.words),
                "source": "chapter loop",
            }
        ],
        "calls": 0,
        "completion_tokens": 0,
    }
    if "chosen" in record:
        return None
    before = ChapterSnapshot.read(store.state(index - 1))
    state = NarrativeState.from_json(before.narrative) if config.state and before.narrative is not None else None
    if config.state and state is None:
        state = NarrativeState()
    ratio = ChapterSnapshot.read(store.state(index)).tokens_per_word or initial_ratio(
        config.prompt, config.tokens_per_word
    )
    budget = run_budget(ctx)
    missing = n - len(record["drafts"])
    if missing > 0:
        at_once = max(1, min(missing, int(getattr(ctx.llm, "concurrency", 1) or 1)))
        messages = _messages(config, plan, state, index, chapter.title)

        def draft(_: int) -> GateOutcome:
            drafter = Drafter.for_config(ctx.llm, gate, ratio, config, "nst_prose", budget=budget)
            return draft_until_gate(
                drafter, [dict(m) for m in messages], REVISE_ATTEMPTS, on_attempt=record_attempt(ctx)
            )

        def keep(got: GateOutcome) -> None:
            record["drafts"].append(
                {
                    "k": len(record["drafts"]) + 1,
                    "text": got.text,
                    "words": got.words,
                    "in_gate": not got.degraded,
                    "source": "best of n",
                }
            )
            _save(store, index, record)  # each draft kept as soon as it exists

        calls, tokens = ctx.calls, ctx.completion_tokens
        if at_once == 1:  # in process (the embedded model): one after another, on this thread
            for i in range(missing):
                keep(draft(i))
        else:
            with ThreadPoolExecutor(max_workers=at_once) as pool:
                for outcome in as_completed([pool.submit(draft, i) for i in range(missing)]):
                    keep(outcome.result())
        record["calls"] += ctx.calls - calls
        record["completion_tokens"] += ctx.completion_tokens - tokens
        record["at_once"] = at_once
        _save(store, index, record)
    scored = score(record["drafts"], gate.target)
    chosen, rule, reason = choose(scored), RULE, None
    if judged(store):
        calls, tokens = ctx.calls, ctx.completion_tokens
        judged_k, why = judge_drafts(ctx.llm, budget, plan.chapter(index).as_json(), state, scored)
        record["calls"] += ctx.calls - calls
        record["completion_tokens"] += ctx.completion_tokens - tokens
        if judged_k is not None:
            chosen, reason, rule = judged_k, why, JUDGE_RULE
        else:
            reason = f"the judge's reply could not be used ({why}); chosen by the rule"
    record.update(drafts=scored, chosen=chosen, rule=rule, **({"reason": reason} if reason else {}))
    how = f"{rule}: {reason}" if reason else rule
    cost = (
        f"the {n - 1} more drafts{' and the judge' if judged(store) else ''} cost {record['calls']} calls, "
        f"{record['completion_tokens']} completion tokens"
    )
    if chosen == 1:
        _save(store, index, record)
        ctx.emit("note", f"chapter {index}: draft 1 of {n} kept ({how}); {cost}")
        return None
    winner = scored[chosen - 1]
    store.revise_chapter(index, winner["text"], reason=f"draft {chosen} of {n} chosen")
    _save(store, index, record)
    ctx.emit("note", f"chapter {index}: draft {chosen} of {n} chosen ({how}); {cost}")
    return rederive_nst(ctx, index)


def use_draft(ctx: RunContext[NstConfig], index: int, k: int) -> tuple[int, Rederived]:
    """The writer's choice: draft ``k`` of chapter ``index`` stored as its next version, state re-derived."""
    store = ctx.store
    record = drafts_of(store, index)
    if record is None:
        raise InputError(f"chapter {index} has no drafts to choose from (write with --drafts N)")
    drafts = {int(d["k"]): d for d in record["drafts"]}
    if k not in drafts:
        raise InputError(f"chapter {index} has drafts {', '.join(map(str, sorted(drafts)))}; no draft {k}")
    chapter = store.revise_chapter(index, drafts[k]["text"], reason=f"draft {k} chosen by the writer")
    _save(store, index, {**record, "chosen": k, "rule": "the writer's choice"})
    return chapter.version, rederive_nst(ctx, index)
