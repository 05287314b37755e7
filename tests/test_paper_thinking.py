"""Under ``paper`` a new run sends no thinking switch: the model thinks as it does by default, as the NstAgent
reference's requests do (issue 33); a flag or the run's record still decides, and other profiles keep off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.llm.options import ModelFlags, StoredModel, resolve
from agent.store import RunStore
from agent.testing.author_server import AuthorServer


def test_paper_takes_the_models_own_thinking_unless_told() -> None:
    paper = resolve(profile="paper")
    assert paper.thinking == "auto" and paper.origin["thinking"] == "--profile paper"
    assert resolve(profile="default").thinking == "off" and resolve().thinking == "off"
    assert resolve(ModelFlags(thinking="off"), profile="paper").thinking == "off"  # a flag wins
    assert resolve(stored=StoredModel(thinking="off"), profile="paper").thinking == "off"  # so does the record


@pytest.fixture(autouse=True)
def _no_model_environment(monkeypatch: Any) -> None:
    for name in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY", "FABULA_CALL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("profile", "switch"), [("paper", None), ("default", {"enable_thinking": False})])
def test_a_paper_run_on_a_vllm_server_sends_no_thinking_switch(
    tmp_path: Path, profile: str, switch: dict[str, Any] | None
) -> None:
    out = tmp_path / "run"
    with AuthorServer(vllm=True) as server:
        argv = ["write", "nst", "--prompt", "A keeper finds a bell.", "--words", "1000", "--endpoint", server.url]
        assert main([*argv, "--profile", profile, "--plan-cache", str(tmp_path / "plans"), "--out", str(out)]) == 0
        chats = [b for b in server.bodies if isinstance(b, dict) and "messages" in b]
    assert chats and {repr(b.get("chat_template_kwargs")) for b in chats} == {repr(switch)}
    with RunStore.open(out, readonly=True) as store:
        assert store.info().config["llm"]["thinking"] == ("auto" if profile == "paper" else "off")
        assert store.info().status == "completed"
    # the chapter turns over HTTP: native tool calls under paper (write, update, DONE), a grammar otherwise
    constrained = [b for b in chats if "response_format" in b]
    native = [b for b in chats if b.get("tools") and b["max_tokens"] > 1]  # (max_tokens 1: the probe's)
    if profile == "paper":  # write, update, DONE; chapter 2 reads chapter 1 first
        assert len(native) in (3, 7)
        assert all(b["tool_choice"] == "auto" and "response_format" not in b for b in native)
        assert [m["role"] for m in native[2]["messages"]] == [  # chapter 1's last turn
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
        ]
    else:
        assert constrained and not native
