"""`gym view`'s HTTP side: the page, its assets (shipped in the package: the page never reaches out to the
internet) and a small JSON API over the rollout index. Every list is paged here, so the browser holds one
page of rows however long the file is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse, Response

from nemo_gym.http.errors import GymError
from nemo_gym.http.protocol import RequestLimits
from nemo_gym.rollout_viewer.index import RolloutIndex, RolloutQuery, TaskQuery
from nemo_gym.serving.servers import finalize_app, new_app
from nemo_gym.serving.workers import BoundApp, bind_listening_socket, serve

ASSETS = Path(__file__).parent / "assets"
ASSET_TYPES = {"viewer.js": "text/javascript", "viewer.css": "text/css"}
SERVER_LABEL = "gym view"
LIMITS = RequestLimits(max_body_bytes=64 * 1024, read_timeout_s=30.0)
# The page and the API change with the file on disk; a browser must never show a stale copy of either.
NO_STORE = {"Cache-Control": "no-store"}
PLACEHOLDER = re.compile(r"\{\{(style|data|script)\}\}")


def page_html(embedded_data: bytes | None = None) -> str:
    """The page: assets by URL when served, inlined with the rollouts' data for `--static`."""
    if embedded_data is None:
        parts = {
            "style": '<link rel="stylesheet" href="assets/viewer.css">',
            "data": "",
            "script": '<script src="assets/viewer.js"></script>',
        }
    else:
        parts = {
            "style": f"<style>\n{(ASSETS / 'viewer.css').read_text()}</style>",
            "data": f'<script type="application/json" id="gym-data">{embedded_data.decode()}</script>',
            "script": f"<script>\n{(ASSETS / 'viewer.js').read_text()}</script>",
        }
    # One pass, so that text inside the data can never be taken for a placeholder.
    return PLACEHOLDER.sub(lambda match: parts[match[1]], (ASSETS / "index.html").read_text())


def viewer_app(index: RolloutIndex) -> FastAPI:
    app = new_app()

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(page_html(), headers=NO_STORE)

    @app.get("/assets/{name}")
    def asset(name: str) -> Response:
        if name not in ASSET_TYPES:
            raise GymError(404, "not_found", f"no asset {name!r}; the page uses {', '.join(ASSET_TYPES)}")
        return Response((ASSETS / name).read_bytes(), media_type=ASSET_TYPES[name], headers=NO_STORE)

    @app.get("/api/summary")
    def summary() -> dict[str, Any]:
        return index.summary()

    @app.get("/api/rollouts")
    def rollouts(query: Annotated[RolloutQuery, Query()]) -> dict[str, Any]:
        return index.rollouts(query)

    @app.get("/api/rollouts/{row_id}")
    def rollout(row_id: int) -> dict[str, Any]:
        shown = index.rollout(row_id)
        if shown is None:
            listed = len(index.entries)
            raise GymError(
                404, "not_found", f"row_id {row_id}: no such rollout; ids run from 0 to {listed - 1}"
            )
        return shown

    @app.get("/api/tasks")
    def tasks(query: Annotated[TaskQuery, Query()]) -> dict[str, Any]:
        return index.tasks(query)

    return finalize_app(app, SERVER_LABEL)


def serve_viewer(index: RolloutIndex, host: str, port: int) -> None:
    """Serve until Ctrl-C; the URL is printed as soon as the port is bound."""
    sock = bind_listening_socket(host, port)
    bound = BoundApp(SERVER_LABEL, viewer_app(index), sock)
    shown_host, shown_port = bound.address
    shown_host = f"[{shown_host}]" if ":" in shown_host else shown_host
    index.start()
    print(f"Viewing {index.files.output} at http://{shown_host}:{shown_port}/  (Ctrl-C stops)", flush=True)
    serve([bound], LIMITS)
