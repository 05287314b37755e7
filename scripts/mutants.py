"""Hand-written mutants of the core rules, and the share the fast test suite kills.

Each mutant replaces one exact piece of source (which must occur exactly once) in a copy of
the tracked tree and runs only the non-slow, non-server, non-embedded test files that cover
that rule; the mutant is killed when they fail. A mutant whose source no longer matches (the
code moved) is reported as stale, not counted. Usage:

    PYTHON=.venv/bin/python python scripts/mutants.py [--only ID ...] [--json bench-results/mutants.json]

73 mutants (#23: 18 of hardening round two); all 73 killed at 7242f69, in 12 minutes on two shared
cores (baseline included): it fits a 45-minute CI job.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST_FILTER = "not slow and not server and not embedded"
TIMEOUT_S = 150
BASELINE_TIMEOUT_S = 900
"""The unmutated run of every chosen mutant's tests at once (the union of the files)."""


@dataclass(frozen=True)
class Mutant:
    id: str
    rule: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


NST_LOOP = ("tests/nst/test_loop.py", "tests/nst/test_runner.py")
EVAL_GATE = ("tests/eval/test_metrics_report.py", "tests/eval/test_publishable.py")
CED = ("tests/eval/test_consistency.py", "tests/eval/test_metrics_report.py", "tests/eval/test_core_rules.py")
WINDOWS = ("tests/eval/test_windows.py", "tests/eval/test_consistency.py", "tests/eval/test_core_rules.py")
QUOTES = ("tests/eval/test_quotes_and_stats.py", "tests/eval/test_consistency.py")
STATS = ("tests/eval/test_quotes_and_stats.py", "tests/eval/test_publishable.py", "tests/eval/test_metrics_report.py")
SEARCH = ("tests/store/test_search.py",)
STATE = ("tests/nst/test_state.py", "tests/nst/test_state_duplicates.py")
PUBLISH = ("tests/eval/test_publishable.py",)

MUTANTS = [
    # gate bounds: the writer's gate and the evaluation's gate check
    Mutant(
        "gate-low-strict",
        "gate bounds",
        "agent/gate.py",
        "return not truncated and self.low <= words",
        "return not truncated and self.low < words",
        (*NST_LOOP, "tests/nst/test_state.py"),
    ),
    Mutant(
        "gate-high-strict",
        "gate bounds",
        "agent/gate.py",
        "self.low <= words <= self.high",
        "self.low <= words < self.high",
        NST_LOOP,
    ),
    Mutant(
        "gate-accepts-truncated",
        "gate bounds",
        "agent/gate.py",
        "return not truncated and self.low <= words <= self.high",
        "return self.low <= words <= self.high",
        NST_LOOP,
    ),
    Mutant("gate-low-075", "gate bounds", "agent/gate.py", "DEFAULT_LOW = 0.8", "DEFAULT_LOW = 0.75", NST_LOOP),
    Mutant("gate-high-125", "gate bounds", "agent/gate.py", "DEFAULT_HIGH = 1.2", "DEFAULT_HIGH = 1.25", NST_LOOP),
    Mutant(
        "eval-gate-strict",
        "gate bounds",
        "agent/gate.py",
        "return math.ceil(low * target), math.floor(high * target)",
        "return math.ceil(low * target), math.floor(high * target) - 1",
        EVAL_GATE,
    ),
    Mutant(
        "eval-gate-wide",
        "gate bounds",
        "agent/eval/textmetrics.py",
        'config.get("gate_high", DEFAULT_HIGH)',
        'config.get("gate_high", 1.5)',
        EVAL_GATE,
    ),
    # tool budgets (one rule for read, search and correct: Lookback.has_budget)
    Mutant(
        "lookback-budget-plus-one",
        "tool budgets",
        "agent/nst/chapter/tools.py",
        "        return used < limit",
        "        return used <= limit",
        NST_LOOP,
    ),
    Mutant(
        "search-in-chapter-one",
        "tool budgets",
        "agent/nst/chapter/tools.py",
        "return s.may_explore() and self.has_budget(s) and s.index > 1",
        "return s.may_explore() and self.has_budget(s)",
        NST_LOOP,
    ),
    Mutant(
        "failed-calls-uncharged",
        "tool budgets",
        "agent/nst/chapter/tools.py",
        "return self.lookback and self.failed < self.failed_budget",
        "return self.lookback",
        NST_LOOP,
    ),
    Mutant(
        "turn-cap-late",
        "tool budgets",
        "agent/nst/chapter/tools.py",
        "if s.turns_left() <= len(required):",
        "if s.turns_left() < len(required):",
        NST_LOOP,
    ),
    # state apply
    Mutant("state-duplicate-character", "state apply", "agent/nst/state.py", "if folded in seen:", "if False:", STATE),
    Mutant(
        "state-case-sensitive-names",
        "state apply",
        "agent/nst/state.py",
        "[k for k in characters if k.casefold() == folded]",
        "[k for k in characters if k == name]",
        STATE,
    ),
    Mutant(
        "state-events-rewritable",
        "state apply",
        "agent/nst/state.py",
        "                if events[item.key] != item.description:",
        "                if False:",
        STATE,
    ),
    Mutant(
        "state-resolve-keeps",
        "state apply",
        "agent/nst/state.py",
        "            del requirements[key]",
        "            pass",
        STATE,
    ),
    Mutant(
        "state-partial-apply",
        "state apply",
        "agent/nst/state.py",
        '        if refused and not applied:\n            raise UpdateError("; ".join(refused))',
        "        pass",
        STATE,
    ),
    Mutant(
        "state-resolve-unknown", "state apply", "agent/nst/state.py", "if key not in requirements:", "if False:", STATE
    ),
    # search windows
    Mutant(
        "window-no-prev",
        "search windows",
        "agent/store/search.py",
        "start = spans[i - 1][0] if i > 0 else a",
        "start = a",
        SEARCH,
    ),
    Mutant(
        "window-no-next",
        "search windows",
        "agent/store/search.py",
        "end = spans[i + 1][1] if i + 1 < len(spans) else b",
        "end = b",
        SEARCH,
    ),
    Mutant(
        "window-centre-weight",
        "search windows",
        "agent/store/search.py",
        "CENTRE_WEIGHT = 3.0",
        "CENTRE_WEIGHT = 1.0",
        SEARCH,
    ),
    Mutant(
        "search-returns-nothing",
        "search windows",
        "agent/store/search.py",
        "    return _ranked(conn, match_expression(terms), k, limit)",
        "    return []",
        SEARCH,
    ),
    Mutant(
        "search-and-of-terms",
        "search windows",
        "agent/store/search.py",
        'return " OR ".join(',
        'return " AND ".join(',
        SEARCH,
    ),
    Mutant(
        "search-before-inclusive",
        "search windows",
        "agent/store/search.py",
        "WHERE chapter_fts MATCH ? AND rowid < ?",
        "WHERE chapter_fts MATCH ? AND rowid <= ?",
        (*SEARCH, "tests/nst/test_loop.py"),
    ),
    # CED formula
    Mutant(
        "ced-per-1k",
        "CED formula",
        "agent/eval/ced.py",
        "return errors / (words / PER_WORDS)",
        "return errors / (words / 1000)",
        CED,
    ),
    Mutant(
        "ced-subtype-counts-instances",
        "CED formula",
        "agent/eval/ced.py",
        '"subtype_ced": ced(len({i.subtype for i in alli}), w)',
        '"subtype_ced": ced(len(alli), w)',
        CED,
    ),
    Mutant(
        "ced-missing-category-scored",
        "CED formula",
        "agent/eval/ced.py",
        "not failed and not missing",
        "not failed",
        CED,
    ),
    Mutant(
        "ced-local-includes-global",
        "CED formula",
        "agent/eval/ced.py",
        "out = [i for i in out if i.subtype not in GLOBAL_SUBTYPES]",
        "out = list(out)",
        CED,
    ),
    Mutant(
        "ced-stale-text-scored",
        "CED formula",
        "agent/eval/ced.py",
        "if score.current and score.complete and score.judge not in chosen:",
        "if score.complete and score.judge not in chosen:",
        CED,
    ),
    Mutant(
        "ced-verified-counts-all",
        "CED formula",
        "agent/eval/ced.py",
        '"verified_instance_ced": ced(len(veri), w)',
        '"verified_instance_ced": ced(len(alli), w)',
        CED,
    ),
    # window selection
    Mutant("window-anchor-20k", "window selection", "agent/eval/windows.py", "(20_000, 7)", "(20_000, 8)", WINDOWS),
    Mutant(
        "window-round-down",
        "window selection",
        "agent/eval/windows.py",
        "return math.floor(value + 0.5)",
        "return math.floor(value)",
        WINDOWS,
    ),
    Mutant(
        "window-10k-boundary",
        "window selection",
        "agent/eval/windows.py",
        "if target_words <= ALL_IN_SCOPE_AT:",
        "if target_words < ALL_IN_SCOPE_AT:",
        WINDOWS,
    ),
    Mutant(
        "window-min-words-extra",
        "window selection",
        "agent/eval/windows.py",
        "while k < n and total < min_words:",
        "while k < n and total <= min_words:",
        WINDOWS,
    ),
    Mutant(
        "window-k-unclamped",
        "window selection",
        "agent/eval/windows.py",
        "k = n if anchored is None else min(anchored, n)",
        "k = n if anchored is None else anchored",
        WINDOWS,
    ),
    Mutant(
        "window-first-off-by-one",
        "window selection",
        "agent/eval/windows.py",
        "first = n - k + 1",
        "first = n - k",
        WINDOWS,
    ),
    # quote verification
    Mutant(
        "quote-empty-matches",
        "quote verification",
        "agent/quotes.py",
        "return bool(q) and q in normalized_text",
        "return q in normalized_text",
        QUOTES,
    ),
    Mutant(
        "quote-no-space-folding",
        "quote verification",
        "agent/quotes.py",
        'return _SPACE.sub(" ", text).strip()',
        "return text.strip()",
        QUOTES,
    ),
    Mutant(
        "quote-case-blind",
        "quote verification",
        "agent/quotes.py",
        "return bool(q) and q in normalized_text",
        "return bool(q) and q.lower() in normalized_text.lower()",
        QUOTES,
    ),
    Mutant(
        "quote-window-for-global",
        "quote verification",
        "agent/eval/ced.py",
        'elif subtype not in GLOBAL_SUBTYPES and not occurs(reply["contradicting_quote"], in_window):',
        'elif not occurs(reply["contradicting_quote"], in_window):',
        QUOTES,
    ),
    Mutant(
        "quote-exact-unchecked",
        "quote verification",
        "agent/eval/ced.py",
        'elif not occurs(reply["exact_quote"], whole):',
        "elif False:",
        QUOTES,
    ),
    # Holm
    Mutant(
        "holm-not-monotone",
        "Holm",
        "agent/eval/stats.py",
        "running = max(running, min(1.0, (m - rank) * p))",
        "running = min(1.0, (m - rank) * p)",
        STATS,
    ),
    Mutant(
        "holm-bonferroni",
        "Holm",
        "agent/eval/stats.py",
        "running = max(running, min(1.0, (m - rank) * p))",
        "running = max(running, min(1.0, m * p))",
        STATS,
    ),
    Mutant(
        "holm-uncapped",
        "Holm",
        "agent/eval/stats.py",
        "running = max(running, min(1.0, (m - rank) * p))",
        "running = max(running, (m - rank) * p)",
        STATS,
    ),
    Mutant(
        "holm-family-per-baseline",
        "Holm",
        "agent/eval/compare.py",
        "key = (c.metric, c.length) if several_baselines else (c.metric, c.baseline)",
        "key = (c.metric, c.baseline)",
        STATS,
    ),
    Mutant(
        "holm-family-per-length-always",
        "Holm",
        "agent/eval/compare.py",
        "key = (c.metric, c.length) if several_baselines else (c.metric, c.baseline)",
        "key = (c.metric, c.length)",
        STATS,
    ),
    # publication rules (issue #10) and the features of the tests it made able to fail
    Mutant(
        "publish-incomplete-kept",
        "publication rules",
        "agent/eval/eligibility.py",
        'if status != "completed":',
        "if False:",
        PUBLISH,
    ),
    Mutant(
        "publish-degraded-kept",
        "publication rules",
        "agent/eval/eligibility.py",
        'if metrics.get("degraded_chapters"):',
        "if False:",
        PUBLISH,
    ),
    Mutant(
        "publish-out-of-gate-kept",
        "publication rules",
        "agent/eval/eligibility.py",
        "elif passed < checked:",
        "elif False:",
        PUBLISH,
    ),
    Mutant(
        "publish-failed-judgment-kept",
        "publication rules",
        "agent/eval/eligibility.py",
        'if row["status"] == "failed":',
        "if False:",
        PUBLISH,
    ),
    Mutant(
        "publish-select-keeps-all",
        "publication rules",
        "agent/eval/eligibility.py",
        'kept = [r for r in rows if not r.get("excluded")]',
        "kept = rows",
        PUBLISH,
    ),
    Mutant(
        "judge-setup-unchecked",
        "publication rules",
        "agent/eval/compare.py",
        'if sa is None or sb is None or (sa == sb and "unrecorded" not in sa):',
        "if True:",
        PUBLISH,
    ),
    Mutant(
        "judge-setup-no-temperature",
        "publication rules",
        "agent/eval/judge.py",
        '"temperature": judge.temperature,',
        "",
        PUBLISH,
    ),
    Mutant(
        "criteria-digest-is-key",
        "publication rules",
        "agent/eval/quality.py",
        "    cdigest = criteria_digest(criteria)\n",
        "    cdigest = key\n",
        PUBLISH,
    ),
    Mutant(
        "generate-many-sequential",
        "concurrency",
        "agent/llm/endpoint.py",
        "if len(requests) <= 1:",
        "if True:",
        ("tests/test_endpoint_protocol.py",),
    ),
    Mutant(
        "runner-drops-degraded",
        "degraded chapters",
        "agent/nst/runner.py",
        "            store.commit_chapter(index, result.title, result.text, state=snapshot.stored(),",
        "            if result.degraded:\n                break\n"
        "            store.commit_chapter(index, result.title, result.text, state=snapshot.stored(),",
        ("tests/nst/test_runner.py",),
    ),
    # hardening round two (#23): each mutant was seen surviving, or is a fix's feature removed
    Mutant(
        "magnet-resume-from-initial-state",
        "resume",
        "agent/magnet/runner.py",
        "state = store.state() or initial_state(story, settings)",
        "state = initial_state(story, settings)",
        ("tests/magnet/test_runner.py",),
    ),
    Mutant(
        "repetition-guard-off",
        "repetition guard",
        "agent/magnet/roles.py",
        "    found = measure(text)\n    if not found.exceeds(",
        "    found = measure(text)\n    return text, trimmed\n    if not found.exceeds(",
        ("tests/magnet/test_runner.py",),
    ),
    Mutant(
        "repetition-guard-keeps-second",
        "repetition guard",
        "agent/magnet/roles.py",
        "if second and measure(second).rate < found.rate:",
        "if second:",
        ("tests/magnet/test_runner.py",),
    ),
    Mutant(
        "repetition-limits-and",
        "repetition guard",
        "agent/repetition.py",
        "return self.rate > max_rate or self.span_words >= max_span",
        "return self.rate > max_rate and self.span_words >= max_span",
        ("tests/test_small_models.py",),
    ),
    Mutant(
        "probe-any-json-enforced",
        "probe",
        "agent/llm/probe.py",
        "return bool(expected(value)) if callable(expected) else value == expected",
        "return True",
        ("tests/test_probe.py",),
    ),
    Mutant(
        "readonly-folder-not-immutable",
        "read-only runs",
        "agent/store/db.py",
        "if not os.access(path.parent, os.W_OK) and not _wal_present(path):",
        "if False:",
        ("tests/store/test_run_files.py",),
    ),
    Mutant(
        "fts-terms-unquoted",
        "search",
        "agent/store/search.py",
        """return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)""",
        """return " ".join(terms)""",
        SEARCH,
    ),
    Mutant(
        "batch-tableless-db-not-restarted",
        "batch resume",
        "agent/batch/runner.py",
        "            if not tables:\n                return True\n",
        "",
        ("tests/batch/test_batch.py::test_a_story_killed_while_its_run_was_being_created_starts_again",),
    ),
    Mutant(
        "http-nested-json-uncaught",
        "hostile server",
        "agent/llm/http.py",
        "        except RecursionError:  # e.g.",
        "        except ZeroDivisionError:  # e.g.",
        ("tests/test_hostile_server.py::test_json_nested_too_deeply_is_one_line",),
    ),
    Mutant(
        "usage-unclamped",
        "hostile server",
        "agent/llm/endpoint.py",
        "and 0 <= value <= MAX_TOKEN_COUNT else 0",
        "and 0 <= value else 0",
        ("tests/test_hostile_server.py::test_absurd_usage_numbers_count_as_unknown",),
    ),
    Mutant(
        "auth-error-retried",
        "hostile server",
        "agent/magnet/roles.py",
        "        _stop_at_authentication(results)\n",
        "",
        (
            "tests/test_hostile_server.py::test_magnet_against_a_failing_server_says_the_servers_cause_and_stops_at_a_401",
        ),
    ),
    Mutant(
        "set-words-unchecked",
        "every setting through every door",
        "agent/settings.py",
        "        check_user_value(key, out[key], flag=flag)\n",
        "",
        ("tests/test_hostile_input.py::test_words_given_by_set_pass_the_same_range_as_words",),
    ),
    Mutant(
        "prompt-set-duplicates-kept",
        "prompt sets",
        "agent/prompt_set.py",
        "        if key in seen:",
        "        if False:",
        ("tests/test_hostile_input.py::test_a_prompt_set_is_read_and_validated_whole_the_same_way_by_write_and_batch",),
    ),
    Mutant(
        "output-dir-unprobed",
        "output paths",
        "agent/store/paths.py",
        'probe = tempfile.mkdtemp(dir=existing, prefix=".fabula-probe-")',
        "probe = tempfile.mkdtemp()",
        ("tests/test_hostile_input.py::test_every_command_that_writes_a_folder_refuses_an_unusable_one_in_one_line",),
    ),
    # (dropping math.isfinite alone is an equivalent mutant: nan and inf fail every bounded comparison)
    Mutant(
        "finite-unbounded",
        "numbers",
        "agent/cli/checks.py",
        "inside = (low < value if low_open else low <= value) and value <= high",
        "inside = True",
        ("tests/test_hostile_input.py::test_numbers_and_addresses_are_checked_at_every_door",),
    ),
    Mutant(
        "serve-checks-after-prepare",
        "serve",
        "agent/cli/serve_cmd.py",
        "    check_options(args)  # every option",
        "    pass  # every option",
        ("tests/test_hostile_input.py::test_serve_dry_run_validates_every_option_before_preparing_the_model",),
    ),
    Mutant(
        "fifo-open-blocks",
        "special files",
        "agent/text.py",
        "os.O_RDONLY | os.O_NONBLOCK |",
        "os.O_RDONLY |",
        ("tests/test_hostile_input.py::test_a_fifo_nobody_writes_to_does_not_block",),
    ),
    Mutant(
        "fork-inside-source",
        "fork",
        "agent/store/lineage/fork.py",
        "    if wanted.is_relative_to(source.run_dir.resolve()):",
        "    if False:",
        ("tests/test_hostile_input.py::test_a_fork_inside_the_run_it_copies_is_refused",),
    ),
]


def copy_tree(target: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in files:
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def run_tests(
    tree: Path, tests: tuple[str, ...], python: str, *, show: bool = False, timeout_s: float = TIMEOUT_S
) -> tuple[bool, float]:
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", PYTEST_FILTER, *tests],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        failed = done.returncode != 0
        if failed and show:
            print(done.stdout[-3000:], file=sys.stderr)
    except subprocess.TimeoutExpired:
        if show:
            print(f"the tests ran past {timeout_s:.0f} s", file=sys.stderr)
        failed = True  # a mutant that makes the tests hang is caught by the suite's timeout too
    return failed, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="mutant ids to run (default: all)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    python = os.environ.get("PYTHON", sys.executable)
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        tree.chmod(0o755)  # the read-only-folder test runs fabula as an unprivileged user from this tree
        copy_tree(tree)
        baseline, _ = run_tests(
            tree, tuple(sorted({t for m in chosen for t in m.tests})), python, show=True, timeout_s=BASELINE_TIMEOUT_S
        )
        if baseline:
            print("the unmutated tree fails its tests: fix that first", file=sys.stderr)
            return 2
        for m in chosen:
            path = tree / m.path
            original = path.read_text(encoding="utf-8")
            if original.count(m.old) != 1:
                results.append({"id": m.id, "rule": m.rule, "status": "stale"})
                print(f"{m.id:34} stale (source moved)")
                continue
            path.write_text(original.replace(m.old, m.new), encoding="utf-8")
            try:
                killed, seconds = run_tests(tree, m.tests, python)
            finally:
                path.write_text(original, encoding="utf-8")
            results.append(
                {"id": m.id, "rule": m.rule, "status": "killed" if killed else "survived", "seconds": round(seconds, 1)}
            )
            print(f"{m.id:34} {'killed' if killed else 'SURVIVED'} ({seconds:.0f} s)", flush=True)
    counted = [r for r in results if r["status"] != "stale"]
    killed = sum(r["status"] == "killed" for r in counted)
    share = killed / len(counted) if counted else 0.0
    print(f"killed {killed} of {len(counted)} ({share:.0%}); stale {len(results) - len(counted)}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps({"killed": killed, "counted": len(counted), "share": share, "mutants": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
