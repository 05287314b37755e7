"""The call ledgers: every LLM call (from the LLM layer's recording hook) and every tool call.

Ledger rows are written as they happen, each in its own short transaction, and are never
rolled back with a lost unit: a call that was paid for stays counted. Chat messages repeat
from call to call (system prompt, outline), so each distinct message is stored once under
its SHA-256 and a call keeps the list of hashes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from typing import Any

from agent.llm.types import CallRecord, CallTiming, Message
from agent.store.records import ToolCall


def message_hash(role: str, content: str) -> str:
    return hashlib.sha256(f"{role}\x00{content}".encode()).hexdigest()


EXTRA = ":json"
"""The stored role's suffix for a message with more than role and content (a native tool call, a
tool result): its content column then holds the whole message as JSON, so it is rebuilt whole."""


def stored_message(message: Message) -> tuple[str, str]:
    """``(role, content)`` as the messages table keeps ``message``."""
    role, content = str(message.get("role", "")), message.get("content")
    if set(message) <= {"role", "content"}:
        return role, str(content if content is not None else "")
    return role + EXTRA, json.dumps(message, ensure_ascii=False, sort_keys=True)


def loaded_message(role: str, content: str) -> Message:
    """A message as :func:`stored_message` kept it."""
    if role.endswith(EXTRA):
        loaded: Message = json.loads(content)
        return loaded
    return {"role": role, "content": content}


def insert_llm_call(conn: sqlite3.Connection, record: CallRecord, *, session_id: int | None, unit: int | None) -> int:
    hashes = []
    for message in record.messages:
        role, content = stored_message(message)
        digest = message_hash(role, content)
        conn.execute(
            "INSERT OR IGNORE INTO llm_messages (hash, role, content) VALUES (?, ?, ?)", (digest, role, content)
        )
        hashes.append(digest)
    cursor = conn.execute(
        "INSERT INTO llm_calls (session_id, unit, role, backend, model, temperature, max_tokens, schema_name, "
        "prompt_tokens, cached_prompt_tokens, completion_tokens, latency_s, finish_reason, error, messages, text, "
        "created_at, sampling, min_tokens, reasoning, timing, tool_calls, tools) VALUES (" + ", ".join("?" * 23) + ")",
        (
            session_id,
            unit,
            record.role,
            record.backend,
            record.model,
            record.temperature,
            record.max_tokens,
            record.schema_name,
            record.prompt_tokens,
            record.cached_prompt_tokens,
            record.completion_tokens,
            record.latency_s,
            record.finish_reason,
            record.error,
            json.dumps(hashes),
            record.text,
            time.time(),
            json.dumps(record.sampling) if record.sampling else None,
            record.min_tokens,
            record.reasoning,
            json.dumps(record.timing.as_dict()) if record.timing else None,
            json.dumps(record.tool_calls, ensure_ascii=False) if record.tool_calls else None,
            json.dumps(record.tools) if record.tools else None,
        ),
    )
    return int(cursor.lastrowid or 0)


def llm_calls(conn: sqlite3.Connection) -> list[CallRecord]:
    """Every recorded call, oldest first, rebuilt with its messages."""
    out = []
    for row in conn.execute("SELECT * FROM llm_calls ORDER BY id"):
        out.append(
            CallRecord(
                role=row["role"],
                backend=row["backend"],
                model=row["model"],
                temperature=row["temperature"],
                max_tokens=row["max_tokens"],
                schema_name=row["schema_name"],
                prompt_tokens=row["prompt_tokens"],
                cached_prompt_tokens=row["cached_prompt_tokens"],
                completion_tokens=row["completion_tokens"],
                latency_s=row["latency_s"],
                finish_reason=row["finish_reason"],
                error=row["error"],
                messages=_messages(conn, json.loads(row["messages"])),
                text=row["text"],
                sampling=json.loads(row["sampling"]) if row["sampling"] else None,
                min_tokens=row["min_tokens"],
                reasoning=row["reasoning"],
                timing=CallTiming.from_dict(json.loads(row["timing"])) if row["timing"] else None,
                tool_calls=json.loads(row["tool_calls"]) if row["tool_calls"] else None,
                tools=json.loads(row["tools"]) if row["tools"] else None,
            )
        )
    return out


def _messages(conn: sqlite3.Connection, hashes: list[str]) -> list[Message]:
    if not hashes:
        return []
    placeholders = ",".join("?" * len(set(hashes)))
    found = {
        r[0]: loaded_message(r[1], r[2])
        for r in conn.execute(
            f"SELECT hash, role, content FROM llm_messages WHERE hash IN ({placeholders})", list(set(hashes))
        )
    }
    return [dict(found[h]) for h in hashes]


def insert_tool_call(
    conn: sqlite3.Connection,
    *,
    session_id: int | None,
    unit: int,
    turn: int,
    tool: str,
    arguments: Any,
    result: str | None,
    ok: bool,
    error: str | None,
) -> int:
    cursor = conn.execute(
        "INSERT INTO tool_calls (session_id, unit, turn, tool, arguments, result, ok, error, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, unit, turn, tool, json.dumps(arguments, ensure_ascii=False), result, int(ok), error, time.time()),
    )
    return int(cursor.lastrowid or 0)


def tool_calls(conn: sqlite3.Connection, unit: int | None = None) -> list[ToolCall]:
    sql = "SELECT unit, turn, tool, arguments, result, ok, error FROM tool_calls"
    rows = (
        conn.execute(sql + " WHERE unit = ? ORDER BY id", (unit,))
        if unit is not None
        else conn.execute(sql + " ORDER BY id")
    )
    return [ToolCall(r[0], r[1], r[2], json.loads(r[3]), r[4], bool(r[5]), r[6]) for r in rows]
