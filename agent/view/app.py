"""The web view's Starlette app: the runs in a folder, and per run its story, state over
time, call ledger and judgments. GET only; every request opens the run read-only and closes
it again, so a run being written is always read at its latest committed unit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agent.store import RunStore, StoreError
from agent.store.readonly import RunIndex, open_readonly
from agent.store.stats import summarize
from agent.view import pages
from agent.view.templates_env import STATIC, render

NO_CACHE = {"Cache-Control": "no-store"}


def create_app(root: str | Path, *, poll_ms: int = 1500) -> Starlette:
    views = _Views(RunIndex(root), poll_ms)
    routes = [
        Route("/", views.runs_page),
        Route("/api/version", views.version),
        Route("/run/{name}", views.run_home),
        Route("/run/{name}/{page}", views.run_page),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    return Starlette(routes=routes)


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

    async def runs_page(self, request: Request) -> Response:
        rows = []
        for name in self.index.runs():
            try:
                with self.opened(name) as store:
                    rows.append({"name": name, "summary": summarize(store), "title": pages.overview(store)["title"],
                                 "error": None})
            except HTTPException as exc:
                rows.append({"name": name, "error": exc.detail})
            except Exception as exc:  # one unreadable run must not hide the rest
                rows.append({"name": name, "error": f"unreadable: {exc}"})
        return self.html("runs.html", rows=rows, root=str(self.index.root))

    async def run_home(self, request: Request) -> Response:
        return RedirectResponse(f"/run/{request.path_params['name']}/story")

    async def run_page(self, request: Request) -> Response:
        name, page = request.path_params["name"], request.path_params["page"]
        if page not in pages.PAGES:
            raise HTTPException(404, f"no page {page!r}")
        options: dict[str, Any] = {}
        if page == "state" and request.query_params.get("unit", "").isdigit():
            options["unit"] = int(request.query_params["unit"])
        with self.opened(name) as store:
            context = pages.page(store, page, **options)
            unit = "Chapter" if store.info().unit_kind == "chapter" else "Step"
        return self.html("run_base.html", page=page, run_name=name, unit_label=unit, static_export=False,
                         passage_href=lambda q: f"/run/{name}/story#{q.anchor}", **context)

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
            return JSONResponse({"version": "|".join(parts)}, headers=NO_CACHE)
        with self.opened(name) as store:
            return JSONResponse({"version": pages.version(store), "last_unit": store.info().last_unit,
                                 "status": store.live_status()}, headers=NO_CACHE)
