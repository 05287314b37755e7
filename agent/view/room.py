"""The view as the editing room: Approve, Revise with a note, Edit, Use draft K, Lint, and Start a book.

Each action runs the same command as the CLI (``python -m agent.cli ...``: one implementation, two doors) as a
background job whose output the page follows (``GET /room/job/ID``). Safety: actions are POST only, each
carries the session's token (made when the view starts; a form without it, or from another origin, is
refused: the CSRF check); a view listening beyond loopback takes actions only with ``--token`` (the access
token is printed once and typed into the page). Every action is recorded in the run by the command itself
(``agent.store.writer.review.record_action``: who, when, what, ``via`` the view). Nothing is lost by an action:
every change is a new version.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from agent import pipelines
from agent.store.readonly import RunIndex, open_readonly
from agent.store.writer.review import actions, in_review, next_steps
from agent.view.templates_env import render

MAX_FORM_BYTES = 1 << 20
MAX_JOBS = 200
ACTIONS = ("approve", "revise", "edit", "use-draft", "lint")
NO_CACHE = {"Cache-Control": "no-store"}


@dataclass(frozen=True)
class RoomSettings:
    """Who may act: ``token`` (the per-session CSRF token, in every form), ``access`` (the token a view
    beyond loopback needs typed in; None on loopback), ``enabled`` (False: beyond loopback without one)."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    access: str | None = None
    enabled: bool = True


@dataclass
class Job:
    id: str
    run: str
    what: str
    argv: list[str]
    log: Path
    process: subprocess.Popen
    started: float = field(default_factory=time.time)

    def state(self) -> dict[str, Any]:
        rc = self.process.poll()
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return {
            "id": self.id,
            "run": self.run,
            "what": self.what,
            "done": rc is not None,
            "rc": rc,
            "output": text[-20_000:],
        }


class Room:
    """The room's routes over the runs of one folder."""

    def __init__(self, index: RunIndex, settings: RoomSettings, poll_ms: int) -> None:
        self.index, self.settings, self.poll_ms = index, settings, poll_ms
        self.jobs: dict[str, Job] = {}
        self.logs = Path(tempfile.mkdtemp(prefix="fabula-room-"))
        self.lock = threading.Lock()

    def routes(self) -> list[Route]:
        return [
            Route("/room", self.start_page, methods=["GET"]),
            Route("/room/start", self.start, methods=["POST"]),
            Route("/room/job/{job}", self.job, methods=["GET"]),
            Route("/room/run/{name}", self.run_page, methods=["GET"]),
            Route("/room/run/{name}/{action}", self.act, methods=["POST"]),
        ]

    # -- pages -----------------------------------------------------------------------------
    def _html(self, template: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(render(template, poll_ms=0, settings=self.settings, **context), headers=NO_CACHE)

    async def start_page(self, request: Request) -> Response:
        return self._html(
            "room_start.html",
            pipelines=pipelines.names(takes="prompt"),
            can_start=self._can_start(),
            job=self.jobs.get(request.query_params.get("job", "")),
        )

    async def run_page(self, request: Request) -> Response:
        name = request.path_params["name"]
        path = self.index.path(name)
        if path is None:
            raise HTTPException(404, f"no run named {name!r}")
        store = open_readonly(path)
        try:
            info = store.info()
            waiting = in_review(store)
            chapters = [(c.index, c.title, c.version) for c in store.chapters()]
            drafts = store.plans.get("drafts_of") or {}
            context = {
                "run_name": name,
                "status": store.live_status(),
                "unit_kind": info.unit_kind,
                "waiting": waiting,
                "next": next_steps(name, waiting) if waiting else [],
                "chapters": chapters,
                "last": info.last_unit,
                "drafts": {int(k): len(v.get("drafts", [])) for k, v in drafts.items()},
                "actions": list(reversed(actions(store)))[:20],
                "texts": {c.index: c.text for c in store.chapters()},
            }
        finally:
            store.close()
        job = self.jobs.get(request.query_params.get("job", ""))
        return self._html("room.html", job=job, **context)

    async def job(self, request: Request) -> Response:
        job = self.jobs.get(request.path_params["job"])
        if job is None:
            raise HTTPException(404, "no such job")
        return JSONResponse(job.state(), headers=NO_CACHE)

    # -- actions ---------------------------------------------------------------------------
    async def _form(self, request: Request) -> dict[str, str]:
        """The POSTed form, after the checks every action passes (refused: 403, nothing run)."""
        if not self.settings.enabled:
            raise HTTPException(403, "actions are off: this view listens beyond loopback without --token")
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise HTTPException(403, "refused: the form came from another site (CSRF check)")
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, "the form is too large")
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", errors="replace")).items()}
        if not hmac.compare_digest(form.get("csrf", ""), self.settings.token):
            raise HTTPException(403, "refused: the form has no valid session token (reload the page)")
        if self.settings.access is not None and not hmac.compare_digest(form.get("access", ""), self.settings.access):
            raise HTTPException(403, "refused: this view needs the access token printed when it started")
        return form

    def _run_dir(self, name: str) -> Path:
        path = self.index.path(name)
        if path is None:
            raise HTTPException(404, f"no run named {name!r}")
        return path

    async def act(self, request: Request) -> Response:
        name, action = request.path_params["name"], request.path_params["action"]
        if action not in ACTIONS:
            raise HTTPException(404, f"no action {action!r}")
        form = await self._form(request)
        run = str(self._run_dir(name))
        chapter = _number(form.get("chapter"), "chapter") if action in ("revise", "edit", "use-draft") else None
        if action == "approve":
            argv = ["approve", run, "--quiet"]
        elif action == "revise":
            note = form.get("note", "").strip()
            if not note:
                raise HTTPException(400, "write a note: what should the revision change?")
            argv = ["revise", run, "--chapter", str(chapter), "--note", note]
        elif action == "edit":
            argv = ["edit", run, "--chapter", str(chapter), "--file", "-"]
        elif action == "use-draft":
            argv = ["revise", run, "--chapter", str(chapter), "--use-draft", str(_number(form.get("draft"), "draft"))]
        else:
            argv = ["lint", run]
        stdin = form.get("text", "") if action == "edit" else None
        job = self._launch(name, action, argv, request, stdin)
        return RedirectResponse(f"/room/run/{quote(name)}?job={job.id}#job", status_code=303)

    def _can_start(self) -> bool:
        return not (self.index.root / "run.db").exists()

    async def start(self, request: Request) -> Response:
        form = await self._form(request)
        if not self._can_start():
            raise HTTPException(409, "this view serves one run; start a book from a view of a folder")
        offered = pipelines.names(takes="prompt")
        prompt, pipeline = form.get("prompt", "").strip(), form.get("pipeline", offered[0])
        words = _number(form.get("words"), "words")
        if not prompt or pipeline not in offered:
            raise HTTPException(400, "give a prompt and one of the pipelines")
        slug = re.sub(r"[^a-z0-9]+", "-", prompt.lower())[:40].strip("-") or "book"
        out = self.index.root / f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}"
        argv = ["write", pipeline, "--prompt", prompt, "--words", str(words), "--out", str(out), "--quiet"]
        if form.get("plan_first") and pipelines.get(pipeline).planned:
            argv.append("--plan-only")
        if form.get("review") and pipelines.get(pipeline).planned:
            argv.append("--review")
        job = self._launch(out.name, "start", argv, request, None)
        return RedirectResponse(f"/room?job={job.id}#job", status_code=303)

    def _launch(self, run: str, what: str, argv: list[str], request: Request, stdin: str | None) -> Job:
        with self.lock:
            if sum(1 for j in self.jobs.values() if j.process.poll() is None and j.run == run):
                raise HTTPException(409, f"an action on {run} is still running; wait for it")
            job_id = secrets.token_hex(8)
            log = self.logs / f"{job_id}.log"
            client = request.client.host if request.client else "unknown"
            env = {
                **os.environ,
                "FABULA_ACTION_VIA": "view",
                "FABULA_ACTION_BY": f"view from {client}",
                "PYTHONUNBUFFERED": "1",
            }
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "agent.cli", *argv],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                )
            if stdin is not None:
                assert process.stdin is not None
                process.stdin.write(stdin.encode("utf-8"))
                process.stdin.close()
            job = Job(job_id, run, what, argv, log, process)
            self.jobs[job_id] = job
            for old in list(self.jobs)[:-MAX_JOBS]:
                if self.jobs[old].process.poll() is not None:
                    del self.jobs[old]
            return job


def _number(value: str | None, what: str) -> int:
    if value is None or not value.strip().isdigit() or not 1 <= int(value) <= 10_000_000:
        raise HTTPException(400, f"give a whole number for {what}")
    return int(value)
