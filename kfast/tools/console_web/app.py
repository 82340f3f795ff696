"""The console's web server (aiohttp): a read-only JSON API over
ClusterQueries and the static page that uses it.

    GET /                          the single-page UI (static/index.html)
    GET /static/...                its script and style sheet
    GET /api/cluster               brokers, controller, KRaft quorum
    GET /api/topics                every topic with counts and sizes
    GET /api/topics/{name}         partitions (leader, replicas, ISR, offsets, size) and configs
    GET /api/groups                consumer groups
    GET /api/groups/{id}           members, assignments, committed offsets and lag
    GET /api/messages?topic=&partition=&offset=|timestamp=&limit=
    GET /api/end-offsets           {topic: sum of log end offsets}, polled for the charts

Only GET routes exist, so the console cannot change the cluster (aiohttp
answers 405 to anything else). A Kafka error is answered as JSON
``{"error": ...}`` with a 4xx/5xx status, never a traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from kfast.protocol import errors
from kfast.tools.console_web.queries import ClusterQueries, QueryError

STATIC = Path(__file__).with_name("static")
_QUERIES = web.AppKey("queries", ClusterQueries)
log = logging.getLogger(__name__)


def _int(request: web.Request, name: str, required: bool = False) -> int | None:
    text = request.query.get(name, "")
    if text == "":
        if required:
            raise QueryError(f"query parameter {name} is required")
        return None
    try:
        return int(text)
    except ValueError:
        raise QueryError(f"query parameter {name} must be an integer, not {text!r}") from None


@web.middleware
async def _errors_as_json(request: web.Request, handler):
    try:
        return await handler(request)
    except QueryError as exc:
        return web.json_response({"error": str(exc)}, status=exc.status)
    except errors.KafkaError as exc:
        return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=502)
    except (OSError, TimeoutError) as exc:
        return web.json_response({"error": f"cluster unreachable: {exc}"}, status=503)


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def _cluster(request):
    return web.json_response(await request.app[_QUERIES].overview())


async def _topics(request):
    return web.json_response(await request.app[_QUERIES].topics())


async def _topic(request):
    return web.json_response(await request.app[_QUERIES].topic(request.match_info["name"]))


async def _groups(request):
    return web.json_response(await request.app[_QUERIES].groups())


async def _group(request):
    return web.json_response(await request.app[_QUERIES].group(request.match_info["group"]))


async def _messages(request):
    topic = request.query.get("topic")
    if not topic:
        raise QueryError("query parameter topic is required")
    return web.json_response(
        await request.app[_QUERIES].messages(
            topic,
            _int(request, "partition", required=True),
            offset=_int(request, "offset"),
            timestamp=_int(request, "timestamp"),
            limit=_int(request, "limit") or 50,
        )
    )


async def _end_offsets(request):
    return web.json_response(await request.app[_QUERIES].end_offsets())


def build_app(bootstrap_servers: str) -> web.Application:
    app = web.Application(middlewares=[_errors_as_json])

    async def lifecycle(app: web.Application):
        app[_QUERIES] = ClusterQueries(bootstrap_servers)
        yield
        await app[_QUERIES].close()

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/", _index)
    app.router.add_static("/static/", STATIC)
    app.router.add_get("/api/cluster", _cluster)
    app.router.add_get("/api/topics", _topics)
    app.router.add_get("/api/topics/{name}", _topic)
    app.router.add_get("/api/groups", _groups)
    app.router.add_get("/api/groups/{group}", _group)
    app.router.add_get("/api/messages", _messages)
    app.router.add_get("/api/end-offsets", _end_offsets)
    return app


async def start_console(bootstrap_servers: str, host: str, port: int) -> web.AppRunner:
    """Serve the console on the running loop; ``await runner.cleanup()`` stops it."""
    runner = web.AppRunner(build_app(bootstrap_servers), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    log.info("kfast console on http://%s:%d/ for %s", host, bound, bootstrap_servers)
    return runner
