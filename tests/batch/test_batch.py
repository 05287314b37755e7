"""``fabula batch`` as a user runs it, on a scripted author: selection, bad input, failure
isolation, retry on resume, a clean stop, ``batch show --json``, eval on a batch folder, and
stories that really run at the same time."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from agent import batch, pipelines
from agent.batch.store import BatchStore
from agent.cli import main
from agent.errors import InputError
from agent.llm.options import LLMOptions
from agent.llm.types import LLMError
from agent.store import RunStore
from agent.testing.author import Author
from agent.testing.author_server import AuthorServer
from agent.testing.server import models_server
from tests.batch.folders import story_dir

CONSTORY = Path("/work/shared/data/constory_prompts_en.jsonl")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def prompts(tmp_path) -> Path:
    """A prompt set shaped like ConStory's (id, language, task_type, prompt)."""
    path = tmp_path / "prompts.jsonl"
    rows = [
        {"id": i, "language": "en", "task_type": "generation", "prompt": f"Story {i}: a bell rings at sea."}
        for i in (3, 7, 12, 20, 35, 1994)
    ]
    rows[2]["prompt"] = "Story 12: DOOMED from the start."
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FABULA_ENDPOINT", raising=False)


def test_ids_pick_prompts_by_their_id_field_in_file_order(prompts):
    assert batch.parse_ids("1-20,35") == [("1", "20"), ("35", None)]
    picked = batch.plan_stories("direct", prompts=prompts, ids="35,1-10", words=1000)
    assert [s.key for s in picked] == ["3", "7", "35"]
    assert [s.key for s in batch.plan_stories("direct", prompts=prompts, ids="7-12", words=1000)] == ["7", "12"]
    assert [s.config["prompt_id"] for s in picked] == ["3", "7", "35"]
    assert picked[0].config["prompt"] == "Story 3: a bell rings at sea."
    assert picked[0].run_dir == "3-story-3-a-bell-rings-at-sea"
    assert [s.key for s in batch.plan_stories("nst", prompts=prompts, words=1000)] == [
        "3",
        "7",
        "12",
        "20",
        "35",
        "1994",
    ]


@pytest.mark.skipif(not CONSTORY.exists(), reason="the ConStory prompt set is not in ../shared/data")
def test_the_constory_prompt_set_is_read_as_it_is():
    every = batch.plan_stories("nst", prompts=CONSTORY, words=20000)
    lines = [json.loads(line) for line in CONSTORY.read_text().splitlines() if line.strip()]
    assert [s.key for s in every] == [str(r["id"]) for r in lines] and len(every) == 100
    assert all(s.config["prompt"] == r["prompt"].strip() for s, r in zip(every, lines, strict=True))
    assert [s.key for s in batch.plan_stories("direct", prompts=CONSTORY, ids="1-300,1994", words=1000)] == [
        str(r["id"]) for r in lines if r["id"] <= 300 or r["id"] == 1994
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ids", "5-2"], "range 5-2 runs backwards"),
        (["--ids", "3,,7"], "empty id"),
        (["--ids", "1-"], "neither an id nor a range"),
        (["--ids", "999"], "no prompt with id 999"),
        (["--ids", "100-200"], "no prompt with an id in 100-200"),
        (["--words", "100"], "--words must be between 500 and 300000"),
        (["--set", "bogus=1"], "unknown setting 'bogus'"),
        (["--concurrency", "0"], "--concurrency must be between 1 and 256"),
        (["--endpoint", "http://127.0.0.1:9/v1"], "cannot reach the server"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, prompts, capsys, argv, message, home):
    out = tmp_path / "batch"
    base = {"--pipeline": "direct", "--prompts": str(prompts), "--words": "1000", "--out": str(out)}
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        base[flag] = value
    code = main(["batch", *[x for pair in base.items() for x in pair], "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and message in err[0], err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prompts", "P", "--words", "1000", "--out", "O"], "needs --pipeline"),
        (["--pipeline", "nst", "--words", "1000", "--out", "O"], "needs --prompts FILE.jsonl"),
        (["--pipeline", "magnet", "--prompts", "P", "--out", "O"], "takes its stories from --stories DIR"),
        (["--pipeline", "nst", "--stories", "S", "--words", "1000", "--out", "O"], "takes its stories from --prompts"),
        (["--pipeline", "magnet", "--stories", "S", "--ids", "3", "--out", "O"], "--ids only goes with --prompts"),
        (["--pipeline", "nst", "--prompts", "P", "--out", "O"], "needs --words N"),
        (
            ["--pipeline", "nst", "--prompts", "/nonexistent.jsonl", "--words", "1000", "--out", "O"],
            "cannot read --prompts",
        ),
        (["--pipeline", "magnet", "--stories", "/nonexistent", "--out", "O"], "not a folder of story definitions"),
    ],
)
def test_wrong_combinations_are_one_line(tmp_path, prompts, capsys, argv, message, home):
    (tmp_path / "stories").mkdir()
    out = tmp_path / "batch"
    subst = {"P": str(prompts), "O": str(out), "S": str(tmp_path / "stories")}
    code = main(["batch", *[subst.get(a, a) for a in argv], "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_a_batch_through_a_server_then_show_export_and_resume(tmp_path, prompts, capsys, home):
    server = AuthorServer()
    out = tmp_path / "batch"
    try:
        code = main(
            [
                "batch",
                "--pipeline",
                "direct",
                "--prompts",
                str(prompts),
                "--ids",
                "3,7,20",
                "--words",
                "1000",
                "--out",
                str(out),
                "--concurrency",
                "3",
                "--endpoint",
                server.url,
                "--quiet",
                "--set",
                "temperature=0.5",
            ]
        )
        stdout = capsys.readouterr().out
        assert code == 0, stdout
        assert "3 of 3 stories completed, 0 failed" in stdout
        assert main(["batch", "show", str(out), "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["batch"]["pipeline"] == "direct" and shown["batch"]["llm"]["model"] == "scripted-author"
        assert [s["key"] for s in shown["stories"]] == ["3", "7", "20"]
        for story in shown["stories"]:
            assert story["status"] == "completed" and story["attempts"] == 1 and story["error"] is None
            assert story["words"] == 1000 and story["units"] == 1 and story["calls"] >= 1
            assert story["completion_tokens"] > 0 and story["prompt_tokens"] > 0
            assert story["started_at"] <= story["ended_at"]
            with RunStore.open(out / story["run_dir"], readonly=True) as store:
                info = store.info()
                assert info.status == "completed" and info.config["prompt_id"] == story["key"]
                assert info.config["temperature"] == 0.5 and info.config["prompt"].startswith(f"Story {story['key']}:")
                assert story["calls"] == len(store.ledger.llm_calls())
        assert shown["totals"]["completed"] == 3 and shown["totals"]["words"] == 3000
        assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(s["run_dir"] for s in shown["stories"])
        assert main(["show", str(story_dir(out, "7"))]) == 0 and "completed" in capsys.readouterr().out
        assert main(["export", str(story_dir(out, "7")), "--format", "txt"]) == 0 and capsys.readouterr().out.strip()
        assert main(["batch", "show", str(out)]) == 0
        table = capsys.readouterr().out
        assert "3 completed" in table and "words     3000 of 3000" in table
        assert main(["batch", "resume", str(out)]) == 0  # the endpoint is remembered; nothing left to do
        assert "nothing to do" in capsys.readouterr().out
        code = main(
            [
                "batch",
                "--pipeline",
                "direct",
                "--prompts",
                str(prompts),
                "--words",
                "1000",
                "--out",
                str(out),
                "--endpoint",
                server.url,
                "--quiet",
            ]
        )
        assert code == 2 and "already holds a batch" in capsys.readouterr().err
    finally:
        server.close()


class Doomed(Author):
    """A scripted author whose server refuses every request about a DOOMED story while ``broken``."""

    broken = True

    def _complete(self, request):
        if Doomed.broken and any("DOOMED" in m["content"] for m in request.messages):
            raise LLMError("the server refused the request (scripted)")
        return super()._complete(request)


def test_a_failing_story_does_not_stop_the_others_and_resume_retries_it(tmp_path, prompts, capsys, monkeypatch, home):
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Doomed())
    monkeypatch.setattr(Doomed, "broken", True)
    out = tmp_path / "batch"
    with models_server() as listing:
        url = listing.url
        code = main(
            [
                "batch",
                "--pipeline",
                "direct",
                "--prompts",
                str(prompts),
                "--ids",
                "3-20",
                "--words",
                "1000",
                "--out",
                str(out),
                "--concurrency",
                "2",
                "--endpoint",
                url,
                "--quiet",
            ]
        )
        stdout = capsys.readouterr().out
        assert code == 1 and "3 of 4 stories completed, 1 failed" in stdout
        assert "12 failed: the server refused the request (scripted)" in stdout
        with BatchStore.open(out, readonly=True) as db:
            rows = {r.key: r for r in db.stories()}
        assert {k: r.status for k, r in rows.items()} == {
            "3": "completed",
            "7": "completed",
            "12": "failed",
            "20": "completed",
        }
        assert rows["12"].error == "the server refused the request (scripted)" and rows["12"].calls == 1
        with RunStore.open(story_dir(out, "12"), readonly=True) as store:  # the failed story's run is kept
            assert store.info().status == "failed"

        monkeypatch.setattr(Doomed, "broken", False)
        assert main(["batch", "resume", str(out), "--endpoint", url]) == 0  # (-q would silence this line)
        assert "1 of 4 stories left" in capsys.readouterr().err
    with BatchStore.open(out, readonly=True) as db:
        rows = {r.key: r for r in db.stories()}
    assert all(r.status == "completed" and r.error is None for r in rows.values())
    assert {k: r.attempts for k, r in rows.items()} == {"3": 1, "7": 1, "12": 2, "20": 1}
    for key in rows:  # completed stories were not written again; the failed one was resumed, not restarted
        with RunStore.open(story_dir(out, key), readonly=True) as store:
            sessions = [r[0] for r in store.query("SELECT kind FROM sessions ORDER BY id")]
            assert sessions == (["start", "resume"] if key == "12" else ["start"])
            assert [c.index for c in store.chapters()] == [1]


def test_eval_accepts_a_batch_folder_as_its_completed_runs(tmp_path, prompts, capsys, monkeypatch, home):
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Doomed())
    out = tmp_path / "batch"
    result = batch.run_batch(
        out,
        "direct",
        prompts=prompts,
        ids="3-12",
        words=1000,
        llm=LLMOptions("endpoint", endpoint="http://127.0.0.1:9/v1"),
        concurrency=2,
    )
    assert [r.status for r in result.stories] == ["completed", "completed", "failed"]
    assert main(["eval", "metrics", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [Path(r["run"]) for r in rows] == [story_dir(out, "3"), story_dir(out, "7")]
    assert all(r["words"] == 1000 for r in rows)
    assert "2 of 3 stories completed" in captured.err
    assert (
        main(
            [
                "eval",
                "report",
                str(out),
                str(story_dir(out, "12")),
                "--out",
                str(tmp_path / "report"),
                "--include-incomplete",
            ]
        )
        == 0
    )
    report = (tmp_path / "report" / "metrics.json").read_text()
    assert all(str(story_dir(out, key)) in report for key in ("3", "7", "12"))


def test_a_stopped_batch_leaves_every_story_resumable(tmp_path, prompts, monkeypatch, home):
    """``stop`` (what Ctrl-C sets): stories end at their next model call, committed units stay."""
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Author())
    stop = threading.Event()
    seen: list[str] = []

    def sink(update):
        seen.append(update.kind)
        if update.kind == "event" and update.event.kind == "committed":
            stop.set()

    out = tmp_path / "batch"
    llm = LLMOptions("endpoint", endpoint="http://127.0.0.1:9/v1")
    with pytest.raises(KeyboardInterrupt):
        batch.run_batch(out, "nst", prompts=prompts, words=1000, llm=llm, concurrency=2, sink=sink, stop=stop)
    with BatchStore.open(out, readonly=True) as db:
        rows = db.stories()
    statuses = [r.status for r in rows]
    assert statuses.count("stopped") == 2 and statuses.count("pending") == 4, statuses
    for row in rows:
        if row.status == "stopped":
            with RunStore.open(out / row.run_dir, readonly=True) as store:
                assert store.info().status == "stopped" and store.live_status() == "stopped"
    result = batch.run(out, llm=llm, concurrency=3)
    assert result.complete and len(result.stories) == 6
    for row in result.stories:
        with RunStore.open(out / row.run_dir, readonly=True) as store:
            assert [c.index for c in store.chapters()] == [1, 2]
            assert store.query("SELECT count(*) FROM chapters")[0][0] == 2


class Slow(Author):
    """Counts how many requests it answers at once: a server that holds each story's reply until
    ``expected`` are in flight together (or 10 s pass), so a loaded machine cannot make K stories
    that do run at once look sequential, and stories that do not run at once still fail."""

    lock = threading.Condition()
    active = peak = 0
    expected = 1

    def reply(self, request):
        if request.role == "direct_story":
            with Slow.lock:
                Slow.active += 1
                Slow.peak = max(Slow.peak, Slow.active)
                Slow.lock.notify_all()
                Slow.lock.wait_for(lambda: Slow.active >= Slow.expected, timeout=10)
            time.sleep(0.05)
            with Slow.lock:
                Slow.active -= 1
        return super().reply(request)


@pytest.mark.parametrize("k", [1, 4])
def test_k_stories_run_at_the_same_time_against_one_server(tmp_path, prompts, k, home):
    Slow.active = Slow.peak = 0
    Slow.expected = k
    server = AuthorServer(author=Slow())
    try:
        started = time.monotonic()
        result = batch.run_batch(
            tmp_path / "batch",
            "direct",
            prompts=prompts,
            ids="3,7,20,35",
            words=1000,
            llm=LLMOptions("endpoint", endpoint=server.url),
            concurrency=k,
        )
        wall = time.monotonic() - started
    finally:
        server.close()
    assert result.complete and result.concurrency == k
    assert Slow.peak == k
    print(f"K={k}: 4 Direct stories, 0.3 s a reply: {wall:.2f} s")


def test_the_embedded_backend_writes_one_story_at_a_time(tmp_path, prompts, monkeypatch, home):
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Author())
    notes: list[str] = []
    result = batch.run_batch(
        tmp_path / "batch",
        "direct",
        prompts=prompts,
        ids="3,7",
        words=1000,
        llm=LLMOptions("embedded"),
        concurrency=4,
        sink=lambda u: notes.append(u.detail) if u.kind == "note" else None,
    )
    assert result.complete and result.concurrency == 1
    assert notes == ["the embedded backend writes one story at a time (--concurrency 4 is taken as 1)"]


def test_a_folder_that_is_not_a_batch_is_one_line(tmp_path, capsys):
    assert main(["batch", "show", str(tmp_path)]) == 2
    assert "is not a fabula batch" in capsys.readouterr().err
    with pytest.raises(InputError):
        batch.run(tmp_path)


def test_a_magnet_batch_from_a_folder_of_story_definitions(tmp_path, capsys, monkeypatch, home):
    import shutil

    from agent.testing.story_llm import StoryLLM

    stories = tmp_path / "stories"
    stories.mkdir()
    for name in ("mystery_codicil", "thriller_museum"):
        shutil.copy(ROOT / "agent" / "magnet" / "examples" / f"{name}.toml", stories)
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: StoryLLM())
    out = tmp_path / "batch"
    with models_server() as listing:
        url = listing.url
        secret = url.replace("http://", "http://user:hunter2@")
        code = main(
            [
                "batch",
                "--pipeline",
                "magnet",
                "--stories",
                str(stories),
                "--words",
                "150",
                "--out",
                str(out),
                "--concurrency",
                "2",
                "--endpoint",
                secret,
                "--quiet",
            ]
        )
    assert code == 0, capsys.readouterr()
    assert "hunter2" not in (out / "batch.db").read_bytes().decode("utf-8", "replace")
    with BatchStore.open(out, readonly=True) as db:
        rows = db.stories()
        assert db.info()["llm"]["endpoint"] is None  # a URL with credentials is not kept
    assert [r.key for r in rows] == ["mystery_codicil", "thriller_museum"]
    for row in rows:
        assert row.status == "completed" and row.target_words == 150 and row.units >= 1
        with RunStore.open(out / row.run_dir, readonly=True) as store:
            assert store.info().pipeline == "magnet" and store.info().unit_kind == "step"
            assert store.info().config["story"]["target_words"] == 150
            assert row.words == store.words_written() and row.units == store.info().last_unit


def test_a_story_whose_run_completed_just_before_a_kill_is_not_written_again(tmp_path, prompts, monkeypatch, home):
    """Killed after a story's run finished but before the batch recorded it: resume only records it."""
    import sqlite3

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Author())
    out = tmp_path / "batch"
    llm = LLMOptions("endpoint", endpoint="http://127.0.0.1:9/v1")
    assert batch.run_batch(out, "direct", prompts=prompts, ids="3,7", words=1000, llm=llm).complete
    conn = sqlite3.connect(out / "batch.db")
    with conn:  # as a SIGKILLed batch leaves it: the story still marked running by a process that is gone
        conn.execute("UPDATE stories SET status = 'running', words = 0, pid = 2147483646 WHERE key = '7'")
    conn.close()
    with BatchStore.open(out, readonly=True) as db:
        assert db.story("7").live_status == "interrupted"
    result = batch.run(out, llm=llm)
    assert result.complete and [r.words for r in result.stories] == [1000, 1000]
    with RunStore.open(story_dir(out, "7"), readonly=True) as store:
        assert [r[0] for r in store.query("SELECT kind FROM sessions ORDER BY id")] == ["start"]


@pytest.mark.parametrize("left", ["empty file", "no tables yet", "tables, no run row"])
def test_a_story_killed_while_its_run_was_being_created_starts_again(tmp_path, prompts, monkeypatch, home, left):
    """#23: a kill inside RunStore.create leaves an empty file, a 4 KiB database without tables
    (the real bug behind the flaky kill test: it failed as "some other program's database"), or
    fabula's tables without the run row; each starts again. Some other program's database does not."""
    import sqlite3

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Author())
    out = tmp_path / "batch"
    llm = LLMOptions("endpoint", endpoint="http://127.0.0.1:9/v1")
    specs = batch.plan_stories("direct", prompts=prompts, ids="3,7", words=1000)
    batch.create(out, "direct", specs, llm).close()
    (story_dir(out, "7")).mkdir()
    db = story_dir(out, "7") / "run.db"
    db.write_bytes(b"")  # what a kill inside RunStore.create can leave
    if left != "empty file":
        from agent.store.migrations import migrate

        with sqlite3.connect(db, isolation_level=None) as made:
            made.execute("PRAGMA journal_mode = WAL")  # the file is created, its schema not yet written
            if left == "tables, no run row":
                migrate(made)
        made.close()
        assert db.stat().st_size > 0
    conn = sqlite3.connect(out / "batch.db")
    with conn:
        conn.execute("UPDATE stories SET status = 'running', attempts = 1, pid = 2147483646 WHERE key = '7'")
    conn.close()
    result = batch.run(out, llm=llm)
    assert result.complete, [r.error for r in result.stories]
    with RunStore.open(story_dir(out, "7"), readonly=True) as store:
        assert store.info().status == "completed" and store.words_written() == 1000


def test_some_other_programs_database_in_a_story_folder_is_not_removed(tmp_path, prompts, monkeypatch, home):
    import sqlite3

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None: Author())
    out = tmp_path / "batch"
    llm = LLMOptions("endpoint", endpoint="http://127.0.0.1:9/v1")
    batch.create(out, "direct", batch.plan_stories("direct", prompts=prompts, ids="3,7", words=1000), llm).close()
    (story_dir(out, "7")).mkdir()
    with sqlite3.connect(story_dir(out, "7") / "run.db") as other:
        other.execute("CREATE TABLE photos (id INTEGER)")
    other.close()
    result = batch.run(out, llm=llm)
    assert not result.complete and (story_dir(out, "7") / "run.db").exists()
    with sqlite3.connect(story_dir(out, "7") / "run.db") as other:
        assert other.execute("SELECT name FROM sqlite_master").fetchall() == [("photos",)]
    other.close()


def test_the_tracker_counts_stories_left_stopped_or_running_as_pending_on_resume():
    """#23: the tracker's count of stopped stories on resume was untested. A resumed batch shows
    the stories a stop (or a kill) left as pending, to be written again, not as stopped."""
    from types import SimpleNamespace

    from agent.batch.tracker import Tracker

    rows = [
        SimpleNamespace(key=k, status=s, words=w, target_words=1000)
        for k, s, w in [
            ("a", "completed", 1000),
            ("b", "stopped", 400),
            ("c", "running", 300),
            ("d", "failed", 0),
            ("e", "pending", 0),
        ]
    ]
    updates = []
    tracker = Tracker(rows, sink=updates.append)
    snap = tracker.snapshot()
    assert (snap.completed, snap.stopped, snap.running, snap.failed, snap.pending) == (1, 0, 0, 1, 3)
    tracker.started("b")
    tracker.ended("b", "stopped", 500)
    snap = tracker.snapshot()
    assert (snap.stopped, snap.pending, snap.running) == (1, 2, 0)
    assert updates[-1].kind == "ended" and updates[-1].status == "stopped"


def test_a_run_that_returns_before_its_last_unit_is_a_failed_story(tmp_path, prompts, monkeypatch, home):
    """#23: a batch outcome when a run returns before its last unit was untested: such a story is
    failed (with why), never counted completed, and a resume writes it again."""
    real_start = pipelines.start

    def start_and_return_early(path, pipeline, config, llm, **kwargs):
        store = RunStore.create(
            path, pipeline=pipeline, config=pipelines.get(pipeline).configure(config, llm), target_units=1
        )
        return store  # returns with no unit written and the run not completed

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None: Author())
    monkeypatch.setattr(pipelines, "start", start_and_return_early)
    out = tmp_path / "batch"
    llm = LLMOptions("endpoint", endpoint="http://127.0.0.1:9/v1")
    result = batch.run_batch(out, "direct", prompts=prompts, ids="3", words=1000, llm=llm)
    assert not result.complete and result.count("failed") == 1 and result.count("completed") == 0
    assert "before its last unit" in (result.stories[0].error or "")
    monkeypatch.setattr(pipelines, "start", real_start)
    assert batch.run(out, llm=llm).complete


def test_each_storys_folder_is_named_after_its_prompt_and_an_old_batch_of_numbered_folders_still_reads(
    tmp_path, prompts, capsys, monkeypatch, home
):
    import sqlite3

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Author())
    out = tmp_path / "batch"
    assert (
        main(
            [
                "batch",
                "--pipeline",
                "direct",
                "--prompts",
                str(prompts),
                "--ids",
                "3,12",
                "--words",
                "1000",
                "--out",
                str(out),
                "--endpoint",
                "http://127.0.0.1:9/v1",
                "--quiet",
            ]
        )
        == 0
    )
    names = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert names == ["12-story-12-doomed-from-the-start", "3-story-3-a-bell-rings-at-sea"], names
    assert main(["show", str(out / names[1])]) == 0 and "completed" in capsys.readouterr().out
    # a batch made before stories were named: its folders "3" and "12" are read and resumed as they are
    for name, key in zip(names, ("12", "3"), strict=True):
        (out / name).rename(out / key)
    with sqlite3.connect(out / "batch.db") as conn:
        conn.execute("UPDATE stories SET run_dir = key")
    conn.close()
    assert main(["batch", "show", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [s["run_dir"] for s in shown["stories"]] == ["3", "12"]
    assert main(["batch", "resume", str(out), "--quiet"]) == 0 and "nothing to do" in capsys.readouterr().out
    assert main(["show", str(out / "3")]) == 0
