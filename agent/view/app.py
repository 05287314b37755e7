"""The web view's Starlette app: the runs in a folder, and per run its story, state over
time, call ledger and judgments (GET only; the editing room's actions are ``agent.view.room``'s).
Every request opens the run read-only and closes it again, so a run being written is always read
at its latest committed unit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agent.store import RunStore, StoreError
from agent.store.paths import DB_NAME
from agent.store.readonly import RunIndex, open_readonly
from agent.store.reports.batches import read_batch
from agent.userinput import number_or_none
from agent.view import pages, workbench
from agent.view.room import Room, RoomSettings
from agent.view.templates_env import STATIC, render

NO_CACHE = {"Cache-Control": "no-store"}
MAX_UNIT = 1_000_000
"""The largest unit, version or result count a query string may name (SQLite takes 64-bit integers;
a 20-digit one overflowed there)."""


LOCAL_NAMES = ("127.0.0.1", "localhost")
"""The names the view answers to when it listens on loopback (the default)."""


def host_names(listen: str | None) -> list[str]:
    """The ``Host:`` names the view answers: its own (loopback: :data:`LOCAL_NAMES`; ``--host H``:
    H too; a wildcard ``--host 0.0.0.0``: any). Any other name is refused, so a web page that
    rebinds its own DNS name to 127.0.0.1 cannot read the served runs."""
    if listen in ("0.0.0.0", "::", "*"):
        return ["*"]
    return [*LOCAL_NAMES, *([listen] if listen and listen not in LOCAL_NAMES else [])]


def create_app(
    root: str | Path, *, poll_ms: int = 1500, room: RoomSettings | None = None, hosts: Sequence[str] | None = None
) -> Starlette:
    """The view of the runs under ``root``; ``room``: who may act in the editing room (``agent.view.room``;
    default: a fresh session token, loopback); ``hosts``: the ``Host:`` names answered (:func:`host_names`;
    None, for an app served by a test client: any)."""
    index = RunIndex(root)
    views = _Views(index, poll_ms)
    routes = [
        *Room(index, room or RoomSettings(), poll_ms).routes(),
        Route("/", views.runs_page),
        Route("/api/version", views.version),
        Route("/run/{name:path}/{page}", views.run_page),  # name: a run, or BATCH/STORY
        Route("/run/{name}", views.run_home),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    # every failure is a page of the view: a 404, a run that cannot be opened, and a bug (500)
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))] if hosts is not None else []
    return Starlette(
        routes=routes, middleware=middleware, exception_handlers={HTTPException: views.error, Exception: views.error}
    )


class _Views:
    """The pages of the view over the runs of one folder."""

    def __init__(self, index: RunIndex, poll_ms: int) -> None:
        self.index, self.poll_ms = index, poll_ms

    @contextmanager
    def opened(self, name: str) -> Iterator[RunStore]:
        path = self.index.path(name)
        if path is None:
            raise HTTPException(404, f"no run named {name!r} in {self.index.root}")
        try:
            store = open_readonly(path)
        except StoreError as exc:
            raise HTTPException(409, str(exc)) from exc
        try:
            yield store
        finally:
            store.close()

    def html(self, template: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(render(template, poll_ms=self.poll_ms, **context), headers=NO_CACHE)

    def _story_names(self, prefix: str, run_dirs: set[str]) -> dict[str, str]:
        """A batch's stories by name (title or prompt), so the list does not read "1", "2", "3"."""
        names = {}
        for run_dir in run_dirs:
            try:
                with self.opened(prefix + run_dir) as store:
                    names[run_dir] = pages.story_name(store)
            except Exception:  # an unreadable story keeps its key alone; the row says what is wrong
                continue
        return names

    async def runs_page(self, request: Request) -> Response:
        rows = []
        for name in self.index.runs():
            try:
                with self.opened(name) as store:
                    overview = pages.overview(store)
                    rows.append(
                        {
                            "name": name,
                            "summary": overview["summary"],
                            "title": overview["title"],
                            "activity": overview["activity"],
                            "error": None,
                        }
                    )
            except HTTPException as exc:
                rows.append({"name": name, "error": exc.detail})
            except Exception as exc:  # one unreadable run must not hide the rest
                rows.append({"name": name, "error": f"unreadable: {exc}"})
        batches = []
        for name, folder in self.index.batches().items():
            prefix = "" if folder == self.index.root else name + "/"
            summary = read_batch(folder)
            linked = {s.run_dir for s in summary.stories if (folder / s.run_dir / DB_NAME).is_file()}
            batches.append(
                {
                    "name": name,
                    "prefix": prefix,
                    "summary": summary,
                    "linked": linked,
                    "names": self._story_names(prefix, linked),
                }
            )
        return self.html("runs.html", rows=rows, batches=batches, root=str(self.index.root))

    async def run_home(self, request: Request) -> Response:
        return RedirectResponse(f"/run/{request.path_params['name']}/story")

    async def run_page(self, request: Request) -> Response:
        name, page = request.path_params["name"], request.path_params["page"]
        if page not in pages.PAGES:
            raise HTTPException(404, f"no page {page!r}")
        options = _options(page, request.query_params)
        with self.opened(name) as store:
            context = pages.page(store, page, **options)
            unit = "Chapter" if store.info().unit_kind == "chapter" else "Step"
        if page == "character" and context["person"] is None:
            raise HTTPException(404, f"no character named {options.get('who')!r} in {name}")
        return self.html(
            "run_base.html",
            page=page,
            run_name=name,
            unit_label=unit,
            static_export=False,
            passage_href=lambda q: f"/run/{quote(name, safe='/')}/story#{q.anchor}",
            find_href=lambda text, unit: workbench.find_href(name, text, unit),
            nav=pages.NAV,
            **context,
        )

    async def error(self, request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "the view failed"
        titles = {404: "Not found", 405: "Not allowed", 409: "Cannot open this run"}
        return HTMLResponse(
            render("error.html", poll_ms=0, code=code, heading=titles.get(code, "Error"), detail=detail),
            status_code=code,
            headers=NO_CACHE,
        )

    async def version(self, request: Request) -> Response:
        name = request.query_params.get("run")
        if name is None:  # the runs list: any run's version, or the set of runs, changing
            parts = []
            for run_name in self.index.runs():
                try:
                    with self.opened(run_name) as store:
                        parts.append(f"{run_name}={pages.version(store)}")
                except HTTPException:
                    parts.append(f"{run_name}=?")
            parts += [f"{name}={read_batch(folder).version()}" for name, folder in self.index.batches().items()]
            return JSONResponse({"version": "|".join(parts)}, headers=NO_CACHE)
        with self.opened(name) as store:
            status = store.live_status()
            return JSONResponse(
                {
                    "version": pages.version(store),
                    "last_unit": store.info().last_unit,
                    "status": status,
                    "word": workbench.status_word(status),
                },
                headers=NO_CACHE,
            )


def _options(page: str, params: Any) -> dict[str, Any]:
    """A page's options from its query string (anything malformed is ignored, never an error)."""
    options: dict[str, Any] = {}

    def number(key: str, high: int = MAX_UNIT) -> int | None:
        return number_or_none(params.get(key, ""), low=0, high=high)

    if page == "state" and (unit := number("unit")) is not None:
        options["unit"] = unit
    if page == "story" and params.get("find"):
        options["find"] = params["find"][:2000]
        if (at := number("at", 1 << 40)) is not None:
            options["at"] = at
    if page == "search":
        options["query"] = params.get("q", "")[:2000]
        if (k := number("k", MAX_UNIT)) is not None:
            options["k"] = k
    if page == "versions":
        for key in ("unit", "a", "b"):
            if (value := number(key)) is not None:
                options[key] = value
    if page == "character":
        options["who"] = params.get("name", "")
    return options
