"""GET /playground (``--enable-playground``): GraphiQL, served entirely by bastion.

The page loads nothing from another origin and runs no inline script, so it works under
the default Content-Security-Policy (``script-src 'self'; style-src 'self'``). Its own
files live in ``playground/static/`` (committed); the browser bundles of GraphiQL and React
come from npm, pinned by ``playground/package-lock.json``, and are copied into
``playground/vendor/`` by ``scripts/build_playground``. Without them the page says how to
build them instead.

Assets are served from a fixed allow-list, never from a path the client names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors
from bastion.transports.http.dispatch import View

__all__ = ["ASSETS", "NOT_BUILT", "PAGE_PATH", "assets_built", "playground_views"]

PAGE_PATH = "/playground"
_ROOT = Path(__file__).with_name("playground")
_STATIC = _ROOT / "static"
_VENDOR = _ROOT / "vendor"
_JS = "text/javascript; charset=utf-8"
_CSS = "text/css; charset=utf-8"
_HTML = "text/html; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Asset:
    path: Path
    content_type: str


#: Every file under /playground/assets/, by name.
ASSETS: dict[str, Asset] = {
    "playground.js": Asset(_STATIC / "playground.js", _JS),
    "playground.css": Asset(_STATIC / "playground.css", _CSS),
    "react.production.min.js": Asset(_VENDOR / "react.production.min.js", _JS),
    "react-dom.production.min.js": Asset(_VENDOR / "react-dom.production.min.js", _JS),
    "graphiql.min.js": Asset(_VENDOR / "graphiql.min.js", _JS),
    "graphiql.min.css": Asset(_VENDOR / "graphiql.min.css", _CSS),
}


#: Logged at start when ``--enable-playground`` is on and the bundles are missing (a wheel
#: or a source tree where ``scripts/build_playground`` has not run).
NOT_BUILT = (
    "--enable-playground: GraphiQL's browser bundles are not built in this installation, "
    "so /playground answers 503; build them from a source tree with "
    "`bash scripts/build_playground` (Node.js and npm, once), use the container image "
    "(which has them), or give --enable-playground=false"
)


def assets_built() -> bool:
    return all(asset.path.is_file() for asset in ASSETS.values())


def playground_views() -> list[View]:
    """The page and its assets (mounted only with ``--enable-playground``)."""

    async def page(_: Request) -> Response:
        if not assets_built():
            body = (_STATIC / "not-built.html").read_bytes()
            return Response(body, status_code=503, media_type=_HTML)
        body = (_STATIC / "index.html").read_bytes()
        return Response(body, media_type=_HTML, headers={"Cache-Control": "no-cache"})

    loaded: dict[str, bytes] = {}  # the files do not change while the server runs

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        found = ASSETS.get(name)
        if found is None or not found.path.is_file():
            raise errors.NotFound("not found")
        if name not in loaded:
            loaded[name] = found.path.read_bytes()
        return Response(
            loaded[name],
            media_type=found.content_type,
            headers={"Cache-Control": "public, max-age=3600"},
        )

    return [
        View(PAGE_PATH, ("GET",), page),
        View(f"{PAGE_PATH}/assets/{{name}}", ("GET",), asset),
    ]
