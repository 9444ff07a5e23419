"""GET /playground (``--enable-playground``): GraphiQL served by bastion itself.

The page must work under the default Content-Security-Policy, so it may reference only
same-origin files and run no inline script; every file it references is served with its
content type. The browser bundles are built from npm by ``scripts/build_playground``
(``.ci/run`` does it; the fixture below does it when they are missing).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from bastion.core import errors
from bastion.transports.graphql import playground
from tests.server.harness import ServerProcess, base_flags, running
from tests.transports.asgi import call_view

ROOT = Path(__file__).resolve().parents[2]


class _Page(HTMLParser):
    """Every URL the page loads, and every piece of script or style written inline."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.stylesheets: list[str] = []
        self.inline: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.inline += [f"{tag} {name}" for name in named if name.startswith("on")]
        if "style" in named:
            self.inline.append(f"{tag} style attribute")
        if tag == "script":
            self._in = "script"
            if named.get("src"):
                self.scripts.append(str(named["src"]))
        elif tag == "style":
            self._in = "style"
        elif tag == "link" and named.get("rel") == "stylesheet":
            self.stylesheets.append(str(named["href"]))
        elif tag in ("img", "iframe", "object", "embed") or (named.get("href") or "").startswith(
            ("http:", "https:", "//")
        ):
            self.inline.append(f"{tag} loads {named.get('src') or named.get('href')}")

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None and data.strip():
            self.inline.append(f"inline {self._in}: {data.strip()[:40]}")


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


@pytest.fixture(scope="session")
def built_assets() -> None:
    """Build the bundles once (``npm ci``), under a lock: xdist workers share the tree."""
    lock = Path(tempfile.gettempdir()) / "bastion-build-playground.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if playground.assets_built():
            return
        if shutil.which("npm") is None or shutil.which("node") is None:
            pytest.fail(
                "Node.js and npm are needed to build the playground (scripts/build_playground)"
            )
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "build_playground")],
            check=True,
            capture_output=True,
            timeout=300,
        )
    assert playground.assets_built()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, built_assets: None) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("playground")
    with running(base_flags("sqlite", str(tmp / "bastion.db")), tmp) as srv:
        yield srv


def test_page_loads_only_same_origin_files_and_no_inline_script(server: ServerProcess) -> None:
    response = httpx.get(server.url + "/playground")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    csp = response.headers["content-security-policy"]
    assert "script-src 'self';" in csp
    assert "style-src 'self';" in csp
    page = _parse(response.text)
    assert page.inline == []
    assert page.scripts == [
        "/playground/assets/react.production.min.js",
        "/playground/assets/react-dom.production.min.js",
        "/playground/assets/graphiql.min.js",
        "/playground/assets/playground.js",
    ]
    assert page.stylesheets == [
        "/playground/assets/graphiql.min.css",
        "/playground/assets/playground.css",
    ]


def test_every_referenced_file_is_served_with_its_content_type(server: ServerProcess) -> None:
    page = _parse(httpx.get(server.url + "/playground").text)
    expected = {
        **{src: "text/javascript; charset=utf-8" for src in page.scripts},
        **{href: "text/css; charset=utf-8" for href in page.stylesheets},
    }
    with httpx.Client(base_url=server.url) as client:
        for path, content_type in expected.items():
            response = client.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"] == content_type, path
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.content, path
        # The bundles are the npm ones the page expects as globals.
        assert b"GraphiQL" in client.get("/playground/assets/graphiql.min.js").content
        react = client.get("/playground/assets/react.production.min.js").content
        assert b"React" in react
        init = client.get("/playground/assets/playground.js").text
        assert "GraphiQL.createFetcher" in init
        assert '"/graphql"' in init


def test_only_listed_assets_are_served(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url) as client:
        for path in (
            "/playground/assets/index.html",
            "/playground/assets/package.json",
            "/playground/assets/..%2F..%2Fplayground.py",
            "/playground/assets/../static/index.html",
        ):
            response = client.get(path)
            assert response.status_code == 404, path
            assert response.json() == {"code": "not_found", "message": "not found"}


async def test_without_the_bundles_the_page_says_how_to_build_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = playground.Asset(tmp_path / "graphiql.min.js", "text/javascript; charset=utf-8")
    monkeypatch.setitem(playground.ASSETS, "graphiql.min.js", missing)
    views = playground.playground_views()
    response = await call_view(views, "/playground")
    assert response.status_code == 503
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    text = bytes(response.body).decode()
    assert "scripts/build_playground" in text
    assert _parse(text).scripts == []
    with pytest.raises(errors.NotFound):
        await call_view(views, "/playground/assets/graphiql.min.js")
