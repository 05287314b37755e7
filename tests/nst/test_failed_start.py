"""A run that fails before its first chapter is kept once it has spent a model call (#14 item 10)."""

from __future__ import annotations

from agent import pipelines
from agent.cli import main
from agent.store import RunStore
from agent.testing.author import Author


class NoOutline(Author):
    """Answers every planner stage but never gives a usable outline (as a plain-text server would)."""

    def reply(self, request):
        if request.role == "plan_outline":
            return "I cannot write JSON, but here is a lovely story about the sea.", "stop"
        return super().reply(request)


def test_a_failed_plan_keeps_the_run_and_its_ledger(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: NoOutline())
    out = tmp_path / "run"
    code = main(["write", "nst", "--prompt", "A keeper.", "--words", "1000", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-2].startswith("fabula: the run is kept in") and err[-1].startswith("fabula: error: no valid outline")
    with RunStore.open(out, readonly=True) as store:
        assert store.info().status == "failed" and "no valid outline" in store.info().error
        assert store.query("SELECT count(*) FROM llm_calls WHERE role = 'plan_outline'")[0][0] == 3
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: Author())
    assert main(["resume", str(out)]) == 0
    with RunStore.open(out, readonly=True) as store:
        assert store.info().status == "completed" and store.info().last_unit == 2


def test_a_start_that_spent_no_call_leaves_nothing(tmp_path, monkeypatch, capsys):
    def refuse(self, store=None, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipelines.LLMOptions, "open", refuse)
    out = tmp_path / "run"
    assert main(["write", "nst", "--prompt", "A keeper.", "--words", "1000", "--out", str(out), "--quiet"]) == 130
    assert not out.exists()
