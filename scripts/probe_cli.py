#!/usr/bin/env python3
"""Re-run the hardening probe (#14): bad inputs and faults a careless or hostile user would try.

Each case runs the real ``fabula`` command in a subprocess (bounded by a timeout) and is
classified: one clear line (a ``fabula: error:`` line, non-zero exit, nothing lost), traceback,
hang, wrong success (exit 0 where it must fail, or the wrong effect), or data lost (a file or
run damaged). Prints the table and each case's verdict; writes ``bench-results/probe_cli.json``.

    .venv/bin/python scripts/probe_cli.py
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.testing.server import Answer, FakeServer  # noqa: E402

STORY = str(ROOT / "agent" / "magnet" / "examples" / "mystery_codicil.toml")


@dataclass
class Case:
    name: str
    argv: list[str]
    check: Callable[[], str | None] | None = None
    """After the run: a problem (data lost / wrong effect) or None."""
    must_fail: bool = True


def fabula(argv: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int | None, str, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "agent.cli", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        return done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        return None, "", ""


def classify(case: Case, code: int | None, out: str, err: str) -> str:
    if code is None:
        return "hang"
    if "Traceback" in err or "internal error" in err:
        return "traceback"
    problem = case.check() if case.check else None
    if problem:
        return "data lost" if "lost" in problem else "wrong success"
    if case.must_fail:
        lines = [ln for ln in err.strip().splitlines() if ln.startswith("fabula: error:")]
        usage = code == 2 and ": error: argument " in (err.strip().splitlines() or [""])[-1]  # argparse's own line
        return "one clear line" if code != 0 and (len(lines) == 1 or usage) else "wrong success"
    return "one clear line" if code == 0 else "wrong success"


def hostile() -> FakeServer:
    """/a/v1: models as a list; /b/v1: data not a list; /c/v1: content not a string."""
    lists = {"/a/v1/models": [1, 2, 3], "/b/v1/models": {"data": "abc"}}
    return FakeServer(
        {
            "GET *": lambda call: Answer(200, lists.get(call.path, {"data": [{"id": "m"}]})),
            "POST *": lambda call: Answer(
                200, {"choices": [{"message": {"content": [1, 2]}, "finish_reason": "stop"}], "usage": {}}
            ),
        }
    )


def make_run(folder: Path) -> Path:
    from agent.store import RunStore

    with RunStore.create(folder / "run", pipeline="nst", config={"prompt": "p", "words": 1000}) as store:
        store.commit_chapter(1, "One", "The keeper lit the lamp. The sea was calm.", state={})
    return folder / "run"


def round_two(tmp: Path, run: Path, url: str, nothing_left: Callable[[Path], Callable[[], str | None]]) -> list[Case]:
    """#23's classes: nested payloads, unusable output paths, special files, unvalidated numbers,
    serve options checked before any work, every setting through every door."""
    (tmp / "file").write_text("x")
    (tmp / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp / "deep.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    (tmp / "dup.jsonl").write_text('{"id": 1, "prompt": "a"}\n{"id": "1", "prompt": "b"}\n')
    os.mkfifo(tmp / "fifo")
    nst = ["write", "nst", "--words", "1000", "--endpoint", f"{url}/ok/v1"]
    return [
        Case("story check: TOML nested 100,000 deep", ["story", "check", str(tmp / "deep.toml")]),
        Case(
            "--prompts: JSONL nested 100,000 deep",
            [
                "write",
                "nst",
                "--prompts",
                str(tmp / "deep.jsonl"),
                "--id",
                "1",
                "--words",
                "1000",
                "--out",
                str(tmp / "r1"),
            ],
            nothing_left(tmp / "r1"),
        ),
        Case(
            '--prompts: ids 1 and "1"',
            [
                "batch",
                "--pipeline",
                "nst",
                "--prompts",
                str(tmp / "dup.jsonl"),
                "--words",
                "1000",
                "--out",
                str(tmp / "b1"),
            ],
            nothing_left(tmp / "b1"),
        ),
        Case("write --out under a file", [*nst, "--prompt", "x", "--out", str(tmp / "file" / "run")]),
        Case("write --out under /proc", [*nst, "--prompt", "x", "--out", "/proc/fabula-run"]),
        Case("write --out a 300-char name", [*nst, "--prompt", "x", "--out", str(tmp / ("a" * 300))]),
        Case("grammars export /dev/null", ["grammars", "export", "/dev/null"]),
        Case("grammars export /proc/x", ["grammars", "export", "/proc/x"]),
        Case("eval report --out FILE", ["eval", "report", str(run), "--out", str(tmp / "file")]),
        Case(
            "fork --out inside the run",
            ["fork", str(run), "--at", "1", "--out", str(run / "sub"), "--no-run"],
            nothing_left(run / "sub"),
        ),
        Case("prompt --temperature nan", ["prompt", "hi", "--temperature", "nan", "--endpoint", f"{url}/ok/v1"]),
        Case("view --poll nan", ["view", str(run), "--poll", "nan"]),
        Case("view --poll -1", ["view", str(run), "--poll", "-1"]),
        Case("view --host 999.1.1.1", ["view", str(run), "--host", "999.1.1.1"]),
        Case("watch --interval inf", ["watch", str(run), "--interval", "inf"]),
        Case(
            "eval compare --resamples 1e12",
            ["eval", "compare", str(run), "--vs", str(run), "--resamples", "1000000000000"],
        ),
        Case(
            "eval inject --controls -1",
            ["eval", "inject", str(run), "--out", str(tmp / "i"), "--controls", "-1"],
            nothing_left(tmp / "i"),
        ),
        Case(
            "magnet --pages 0.0001",
            ["write", "magnet", STORY, "--pages", "0.0001", "--out", str(tmp / "m9")],
            nothing_left(tmp / "m9"),
        ),
        Case(
            "--set words=5",
            [*nst, "--prompt", "x", "--set", "words=5", "--out", str(tmp / "n5")],
            nothing_left(tmp / "n5"),
        ),
        Case(
            "--set story={}",
            ["write", "magnet", STORY, "--set", "story={}", "--out", str(tmp / "m8")],
            nothing_left(tmp / "m8"),
        ),
        Case(
            "--prompt-file FIFO without a writer", [*nst, "--prompt-file", str(tmp / "fifo"), "--out", str(tmp / "f")]
        ),
        Case("edit --file /dev/zero", ["edit", str(run), "--chapter", "1", "--file", "/dev/zero", "--no-rederive"]),
        Case("edit --chapter --var", ["edit", str(run), "--chapter", "1", "--var", "x=1", "--no-rederive"]),
        *[
            Case(f"serve --dry-run {' '.join(a)}", ["serve", "--dry-run", *a])
            for a in (
                ["--replicas", "0"],
                ["--tensor-parallel-size", "0"],
                ["--dtype", "bogus"],
                ["--log-file", str(tmp)],
                ["--served-name", ""],
                ["--model", "/nonexistent"],
            )
        ],
    ]


def main() -> int:
    tmp = Path(tempfile.mkdtemp())
    env = {**os.environ, "FABULA_HOME": str(tmp / "home"), "PYTHONPATH": str(ROOT)}
    for var in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY"):
        env.pop(var, None)
    run = make_run(tmp)
    db_bytes = (run / "run.db").read_bytes()
    existing = tmp / "notes.md"
    existing.write_text("my notes")
    server = hostile()
    url = server.root
    bad_story = tmp / "names.toml"
    bad_story.write_text(
        'title = "T"\ngenre = "g"\ngoal = "x"\nwords = 300\n'
        + "".join(
            f'[[characters]]\nname = "{n}"\nrole = "r"\ndescription = "d"\npersonality = "p"\ngoals = "g"\n'
            'location = "l"\n'
            for n in ("Ann Marie", "Ann-Marie")
        )
    )

    def untouched() -> str | None:
        if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
            return "lost: /dev/null is no longer a device"
        if existing.read_text() != "my notes":
            return "lost: an existing file was overwritten"
        return None

    def config_unchanged() -> str | None:
        from agent.store import RunStore

        with RunStore.open(run, readonly=True) as store:
            return None if store.info().config.get("words") == 1000 else "lost: a bad value was stored"

    def nothing_left(path: Path) -> Callable[[], str | None]:
        return lambda: f"wrong: {path} was left behind" if path.exists() else None

    cases = [
        Case("export -o /dev/null", ["export", str(run), "-o", "/dev/null"], untouched),
        Case("export over an existing file", ["export", str(run), "-o", str(existing)], untouched),
        Case(
            "export -o - is standard output", ["export", str(run), "-o", "-"], nothing_left(ROOT / "-"), must_fail=False
        ),
        Case(
            "resume --set words={...} --force",
            ["resume", str(run), "--force", "--set", 'words={"a":1}'],
            config_unchanged,
        ),
        Case("resume --set words=-5 --force", ["resume", str(run), "--force", "--set", "words=-5"], config_unchanged),
        Case("resume --set unknown key", ["resume", str(run), "--force", "--set", "bogus=1"], config_unchanged),
        Case("endpoint http://256.1.1.1/v1", ["prompt", "hi", "--endpoint", "http://256.1.1.1/v1"]),
        Case("endpoint http://[::1", ["prompt", "hi", "--endpoint", "http://[::1"]),
        Case("/v1/models is a list", ["prompt", "hi", "--endpoint", f"{url}/a/v1"]),
        Case("/v1/models data not a list", ["prompt", "hi", "--endpoint", f"{url}/b/v1"]),
        Case("reply content not a string", ["prompt", "hi", "--endpoint", f"{url}/c/v1", "--allow-unconstrained"]),
        Case("credentials in the URL", ["prompt", "hi", "--endpoint", "http://user:hunter2@127.0.0.1:9/v1"]),
        Case("search --before 1e14", ["search", str(run), "lamp", "--before", "100000000000000"]),
        Case("search -k 1e20", ["search", str(run), "lamp", "-k", "100000000000000000000"]),
        Case(
            "magnet --pages inf",
            ["write", "magnet", STORY, "--pages", "inf", "--out", str(tmp / "m1")],
            nothing_left(tmp / "m1"),
        ),
        Case(
            "magnet --pages nan",
            ["write", "magnet", STORY, "--pages", "nan", "--out", str(tmp / "m2")],
            nothing_left(tmp / "m2"),
        ),
        Case(
            "magnet --pages 1e300",
            ["write", "magnet", STORY, "--pages", "1e300", "--out", str(tmp / "m3")],
            nothing_left(tmp / "m3"),
        ),
        Case(
            "nst --words 9223372036854775807",
            ["write", "nst", "--prompt", "x", "--words", "9223372036854775807", "--out", str(tmp / "n1")],
            nothing_left(tmp / "n1"),
        ),
        Case(
            "story file /dev/zero", ["write", "magnet", "/dev/zero", "--out", str(tmp / "m4")], nothing_left(tmp / "m4")
        ),
        Case(
            "prompt file /dev/zero",
            ["write", "nst", "--prompt-file", "/dev/zero", "--words", "1000", "--out", str(tmp / "n2")],
            nothing_left(tmp / "n2"),
        ),
        Case(
            "magnet with a bad endpoint",
            ["write", "magnet", STORY, "--endpoint", "http://127.0.0.1:9/v1", "--out", str(tmp / "m5")],
            nothing_left(tmp / "m5"),
        ),
        Case(
            "names sharing a slug",
            ["write", "magnet", str(bad_story), "--out", str(tmp / "m6")],
            nothing_left(tmp / "m6"),
        ),
        Case(
            "magnet --set shift_every=0",
            ["write", "magnet", STORY, "--set", "shift_every=0", "--out", str(tmp / "m7")],
            nothing_left(tmp / "m7"),
        ),
        Case("serve --host ''", ["serve", "--host", "", "--dry-run"]),
        Case("serve -- --host 0.0.0.0", ["serve", "--dry-run", "--", "--host", "0.0.0.0"]),
        Case("serve --max-model-len -1", ["serve", "--max-model-len", "-1", "--dry-run"]),
        Case("serve --cpu-kv-cache-gib -2", ["serve", "--cpu-kv-cache-gib", "-2", "--dry-run"]),
        Case("serve --ready-timeout -5", ["serve", "--ready-timeout", "-5", "--dry-run"]),
    ]
    cases += round_two(tmp, run, url, nothing_left)
    rows = []
    for case in cases:
        code, out, err = fabula(case.argv, env)
        verdict = classify(case, code, out, err)
        if case.name == "credentials in the URL" and "hunter2" in err + out:
            verdict = "wrong success"
        if case.name == "export -o - is standard output" and "keeper lit the lamp" not in out:
            verdict = "wrong success"
        rows.append(
            {"case": case.name, "exit": code, "verdict": verdict, "line": (err.strip().splitlines() or [""])[-1][:160]}
        )
        print(f"{verdict:15} {case.name:38} {rows[-1]['line']}", flush=True)
    if (run / "run.db").read_bytes() != db_bytes and config_unchanged() is not None:
        print("DATA LOST: the run database changed")
    kinds = ["one clear line", "traceback", "hang", "wrong success", "data lost"]
    counts = {k: sum(r["verdict"] == k for r in rows) for k in kinds}
    print("\n| tried | " + " | ".join(kinds) + " |")
    print(f"| {len(rows)} | " + " | ".join(str(counts[k]) for k in kinds) + " |")
    (ROOT / "bench-results").mkdir(exist_ok=True)
    (ROOT / "bench-results" / "probe_cli.json").write_text(json.dumps({"counts": counts, "rows": rows}, indent=2))
    server.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
