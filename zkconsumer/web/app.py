"""The live view's web app: one page, its data as server-sent events, and the buttons' endpoint, over any
:class:`~zkconsumer.web.snapshot.LiveSource`.

Routes:

* ``GET /``: the page (``static/index.html``; ``static/live.js`` draws it, see there for its DOM hooks);
* ``GET /events``: server-sent events, each a ``snapshot`` event whose data is :meth:`Snapshot.to_json`, sent
  when the snapshot changes (checked every ``interval`` seconds) and at least every ``heartbeat`` seconds, so
  that a page notices a server that went away and a proxy keeps the stream open;
* ``GET /snapshot``: the same JSON once (scripts, tests);
* ``POST /act``: ``{"action": NAME, "member": ID or null}`` → 200 ``{"message"}``; an action the source refuses
  (:class:`~zkconsumer.errors.IllegalArgument`) or a malformed request → 400 ``{"error"}``, never a 500;
* ``GET /static/...``: the page's script and style, and ``plotly.min.js`` from the installed plotly package (the
  page loads nothing from the network).

The source keeps its snapshot current itself (watches, a poll); the app only asks for it, so a ZooKeeper or a
broker that goes away shows in the snapshot's ``status`` and never stops the app.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from zkconsumer.errors import IllegalArgument, ZkConsumerError
from zkconsumer.web.snapshot import LiveSource

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"


def plotly_js() -> Path | None:
    """plotly's bundled ``plotly.min.js``, found without importing plotly (which would pull in numpy-sized
    imports for a file we only serve); None when plotly is not installed (the page then draws no timeline)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    return path if path.is_file() else None


def _comparable(data: dict[str, Any]) -> str:
    """The snapshot without its timestamp: what decides whether the page needs a new one."""
    return json.dumps({k: v for k, v in data.items() if k != "ts"}, sort_keys=True, default=str)


def make_app(source: LiveSource, *, interval: float = 0.25, heartbeat: float = 3.0,
             stopping: threading.Event | None = None) -> Starlette:
    """The app over ``source``. ``stopping``: set by whoever shuts the server down, so that open event streams
    end at once instead of holding the shutdown until its timeout (serve.py passes its own)."""
    stopping = stopping if stopping is not None else threading.Event()

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    async def snapshot(request: Request) -> Response:
        return JSONResponse(source.snapshot().to_json())

    async def stream(request: Request) -> AsyncIterator[ServerSentEvent]:
        last, sent_at = None, 0.0
        loop = asyncio.get_running_loop()
        while not stopping.is_set():
            data = source.snapshot().to_json()
            key = _comparable(data)
            if key != last or loop.time() - sent_at >= heartbeat:
                last, sent_at = key, loop.time()
                yield ServerSentEvent(data=json.dumps(data, default=str), event="snapshot")
            await asyncio.sleep(interval)

    async def events(request: Request) -> Response:
        # a client that goes away cancels its generator (sse-starlette): nothing to clean up, nothing logged
        return EventSourceResponse(stream(request), send_timeout=10)

    async def act(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "expected a JSON body: {\"action\": ..., \"member\": ...}"}, 400)
        if not isinstance(body, dict) or not isinstance(body.get("action"), str):
            return JSONResponse({"error": "expected {\"action\": NAME, \"member\": ID or null}"}, 400)
        member = body.get("member")
        if member is not None and not isinstance(member, str):
            return JSONResponse({"error": "member must be a string or null"}, 400)
        try:
            message = await run_in_threadpool(source.act, body["action"], member)
        except IllegalArgument as e:
            return JSONResponse({"error": str(e)}, 400)
        except ZkConsumerError as e:  # the action was taken and failed: say why, as the page shows any answer
            log.warning("action %s on %s failed: %s", body["action"], member, e)
            return JSONResponse({"error": f"{type(e).__name__}: {e}"}, 500)
        return JSONResponse({"message": message})

    async def plotly(request: Request) -> Response:
        path = plotly_js()
        if path is None:
            return Response("plotly is not installed", 404)
        return FileResponse(path, media_type="text/javascript")

    routes = [
        Route("/", page),
        Route("/snapshot", snapshot),
        Route("/events", events),
        Route("/act", act, methods=["POST"]),
        Route("/static/plotly.min.js", plotly),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.source = source
    app.state.stopping = stopping
    return app
