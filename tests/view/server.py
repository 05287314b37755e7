"""The view served for real (uvicorn on a loopback port, in a thread) for the browser tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from agent.testing.ports import free_port
from agent.view.app import create_app


@contextmanager
def serve(root: Path, *, poll_ms: int = 300, room=None) -> Iterator[str]:
    """Serve the runs under ``root``; yields the base URL; stops the server on exit. ``room``: the editing
    room's settings (``agent.view.room.RoomSettings``; default: a fresh session token)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(root, poll_ms=poll_ms, room=room),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("the view did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
