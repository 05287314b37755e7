"""The chapter loop's native tool protocol (``tool_protocol`` "native", the paper profile): the request
structure every chapter turn sends, several calls per reply, the prose inside ``write``, JSON results in
``role: tool`` messages, the length feedback and the placeholder, exhausted and malformed calls, DONE.

Structure only: no text of the reference is pinned here (its prompts are its authors')."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.llm.base import Request
from agent.llm.roles import role_order_error
from agent.nst.chapter.restarts import ChapterFailedError
from agent.nst.config import NstConfig
from agent.store import RunStore
from agent.testing.author import Author, NativeCall, chapter_of, native_policy, native_update, tool_results
from tests.nst.profile_runs import written

TOOL_SCHEMAS = {
    "read": {"chapter_id": "integer"},
    "search": {"query": "string"},
    "correct": {"chapter_id": "integer", "old_text": "string", "new_text": "string"},
    "write": {"chapter_id": "integer", "title": "string", "content": "string"},
    "update": {
        "upsert_character_state": "array",
        "add_past_event": "array",
        "add_future_requirement": "array",
        "resolve_future_requirement": "array",
    },
}


def _run(tmp_path: Path, author: Author, **over: Any) -> RunStore:
    return written(tmp_path / "run", "nst", NstConfig, author, **over)


def turns(author: Author) -> list[Request]:
    return [r for r in author.requests if r.role == "nst_turn"]


def test_every_turn_offers_all_five_tools_with_the_reference_argument_schemas(tmp_path: Path) -> None:
    author = Author()
    store = _run(tmp_path, author)
    assert store.info().status == "completed"
    requests = turns(author)
    # the kit's path: write, update, DONE, after a read in chapter 2 and a search in chapter 3
    assert len(requests) == 3 + 4 + 4 and not author.by_role("nst_prose")
    for request in requests:
        assert request.tool_choice == "auto" and request.output_type is None and request.constraint is None
        assert request.max_tokens == 2886  # min(32768, max(1024, ceil(1.35 x 1000 + 1536)))
        names = [t["function"]["name"] for t in request.tools or []]
        assert names == ["read", "search", "correct", "write", "update"]
        for tool in request.tools or []:
            parameters = tool["function"]["parameters"]
            assert {k: v["type"] for k, v in parameters["properties"].items()} == TOOL_SCHEMAS[tool["function"]["name"]]
            assert parameters["required"] == list(TOOL_SCHEMAS[tool["function"]["name"]])
        update = request.tools[-1]["function"] if request.tools else {}
        items = update["parameters"]["properties"]["upsert_character_state"]["items"]
        assert update["strict"] is True and items["required"] == ["name", "description"]
        assert role_order_error(request.messages) is None
        assert [m["role"] for m in request.messages[:2]] == ["system", "user"]
    # a chapter's turns: [system, user], then + assistant(write) + tool, then + assistant(update) + tool
    chapter = [r for r in requests if chapter_of(r) == 1]
    assert [[m["role"] for m in r.messages] for r in chapter] == [
        ["system", "user"],
        ["system", "user", "assistant", "tool"],
        ["system", "user", "assistant", "tool", "assistant", "tool"],
    ]
    read = json.loads([r for r in requests if chapter_of(r) == 2][1].messages[3]["content"])
    assert read["ok"] and read["budget_charged"] and read["chapter_id"] == 1 and len(read["content"].split()) == 1000
    search = json.loads([r for r in requests if chapter_of(r) == 3][1].messages[3]["content"])
    assert search["ok"] and search["hit_count"] == len(search["hits"]) > 0
    assert set(search["hits"][0]) == {"chapter_id", "sentence", "before", "after"}
    write_call = chapter[1].messages[2]["tool_calls"][0]["function"]
    assert write_call["name"] == "write" and len(json.loads(write_call["arguments"])["content"].split()) == 1000
    result = json.loads(chapter[1].messages[3]["content"])
    assert (
        result["ok"] is True
        and result["word_count"] == 1000
        and (result["min_word_count"], result["max_word_count"])
        == (
            800,
            1200,
        )
    )
    assert [c.tool for c in store.ledger.tool_calls() if c.unit == 2] == ["read", "write", "update", "finish"]
    assert {tuple(c.tools or ()) for c in store.ledger.llm_calls() if c.role == "nst_turn"} == {
        ("read", "search", "correct", "write", "update")
    }


def _scripted(steps: dict[int, list[tuple[str, list[NativeCall]]]]) -> Any:
    """A native policy that plays ``steps[chapter]`` turn by turn, then the shortest path."""

    def policy(author: Author, request: Request) -> tuple[str, list[NativeCall]]:
        chapter = chapter_of(request)
        done = sum(1 for m in request.messages if m["role"] == "assistant")
        script = steps.get(chapter, [])
        if done < len(script):
            text, calls = script[done]
            return text, [(n, a if a != "DRAFT" else author.native_draft(request)) for n, a in calls]
        return native_policy(author, request)

    return policy


def test_several_calls_in_one_reply_run_in_order(tmp_path: Path) -> None:
    """write and update in one reply: the update sees the write accepted a moment before; DONE next."""

    def policy(author: Author, request: Request) -> tuple[str, list[NativeCall]]:
        if not tool_results(request):
            return "", [("write", author.native_draft(request)), ("update", native_update(request))]
        return "DONE", []

    author = Author(native=policy)
    store = _run(tmp_path, author)
    assert store.info().status == "completed" and len(turns(author)) == 6  # (a custom policy: no lookups)
    second = turns(author)[1]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert [json.loads(m["content"])["ok"] for m in second.messages[3:]] == [True, True]
    assert [c.tool for c in store.ledger.tool_calls() if c.unit == 1] == ["write", "update", "finish"]


def test_a_rejected_write_gets_feedback_and_its_draft_gives_way_once_one_is_accepted(tmp_path: Path) -> None:
    sizes = {(1, 0): 560}
    author = Author(length=lambda request, attempt: sizes.get((chapter_of(request), attempt), 1000))
    store = _run(tmp_path, author)
    assert store.info().status == "completed"
    chapter = [r for r in turns(author) if chapter_of(r) == 1]
    after_reject = chapter[1].messages
    assert [m["role"] for m in after_reject] == ["system", "user", "assistant", "tool", "user"]
    rejected = json.loads(after_reject[3]["content"])
    assert rejected["ok"] is False and rejected["word_count"] == 560 and rejected["within_tolerance"] is False
    assert "560 words" in after_reject[4]["content"] and "still in the conversation" in after_reject[4]["content"]
    assert json.loads(after_reject[2]["tool_calls"][0]["function"]["arguments"])["content"].count(" ") > 500
    # once the second write is accepted, the rejected draft's content is a placeholder with its counts
    later = chapter[2].messages
    arguments = json.loads(later[2]["tool_calls"][0]["function"]["arguments"])
    assert arguments["content"].startswith("[rejected draft removed") and "words=560" in arguments["content"]
    assert json.loads(later[6]["content"])["ok"] is True


def test_exhausted_unknown_and_malformed_calls_answer_with_error_results(tmp_path: Path) -> None:
    reads = [("", [("read", {"chapter_id": 1})])] * 4
    steps = {
        2: [
            *reads,
            (
                "",
                [("search", {"query": ""}), ("dance", {}), ("write", {"chapter_id": 7, "title": "x", "content": "y"})],
            ),
            ("DONE", []),  # before an accepted write: a nudge, not the end
            ("", [("write", "DRAFT"), ("read", {"chapter_id": 2})]),
        ]
    }
    author = Author(native=_scripted(steps))
    store = _run(tmp_path, author)
    assert store.info().status == "completed"
    chapter = [r for r in turns(author) if chapter_of(r) == 2]
    results = [(name, r) for name, r in tool_results(chapter[-1])]
    assert [r["ok"] for name, r in results[:4]] == [True, True, True, False]
    assert results[3][1] == {"ok": False, "budget_charged": False, "error": "read budget exhausted"}
    assert results[4][1]["error"] == "query must be a non-empty string"
    assert results[5][1] == {"ok": False, "error": "unknown tool dance"}
    assert results[6][1]["error"].startswith("write must target the current chapter")
    nudge = chapter[6].messages[-1]
    assert nudge["role"] == "user" and "no accepted draft yet" in nudge["content"]
    assert results[7][1]["ok"] is True  # the write in the same reply as a read
    assert results[8][1]["error"] == "read budget exhausted"  # the chapter's budget stays spent


def test_malformed_arguments_are_refused_as_missing_ones(tmp_path: Path) -> None:
    from agent.llm.types import RawReply, ToolCall, Usage

    calls = iter([ToolCall("call_x", "write", '{"chapter_id": 1, "content": "unterminated')])

    class Broken(Author):
        def native_answer(self, request: Request) -> RawReply:
            if chapter_of(request) == 1 and not tool_results(request):
                return RawReply("", "tool_calls", Usage(1, 0, 1), self.model, tool_calls=(next(calls),))
            return super().native_answer(request)

    author = Broken()
    assert _run(tmp_path, author).info().status == "completed"
    second = [r for r in turns(author) if chapter_of(r) == 1][1]
    assert second.messages[2]["tool_calls"][0]["function"]["arguments"].endswith("unterminated")  # kept as sent
    assert json.loads(second.messages[3]["content"])["error"].startswith("write must target the current chapter")


def test_a_chapter_without_done_is_restarted_from_its_checkpoint_and_never_kept_degraded(tmp_path: Path) -> None:
    """Chapter 2 writes and updates but keeps talking instead of replying DONE: at the turn cap the try
    fails, the chapter restarts from the checkpoint, and when every restart failed too the run fails with
    chapter 1 kept and nothing of chapter 2."""

    def chatty(author: Author, request: Request) -> tuple[str, list[NativeCall]]:
        text, calls = native_policy(author, request)
        return ("I think the chapter is done now." if chapter_of(request) == 2 and text == "DONE" else text), calls

    author = Author(native=chatty)
    with pytest.raises(ChapterFailedError, match="chapter 2 failed 2 times"):
        _run(tmp_path, author, max_turns=5, chapter_restarts=1)
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        assert [c.index for c in store.chapters()] == [1]
        restarts = [c for c in store.ledger.tool_calls() if c.tool == "restart"]
        assert restarts and "did not reply DONE in 5 turns" in (restarts[0].error or "")
    nudges = [
        r.messages[-1]["content"]
        for r in turns(author)
        if chapter_of(r) == 2 and len(r.messages) > 2 and r.messages[-1]["role"] == "user"
    ]
    assert nudges and all("exactly DONE" in n for n in nudges)


def test_the_default_profile_keeps_the_grammar_protocol(tmp_path: Path) -> None:
    author = Author()
    written(tmp_path / "run", "nst", NstConfig, author, profile="default")
    assert turns(author) and all(r.tools is None and r.constraint is not None for r in turns(author))
    assert author.by_role("nst_prose")
