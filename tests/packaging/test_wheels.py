"""The two distributions as a user installs them: wheels built from this tree, each put into a
fresh virtual environment with nothing else, run from there (never from the checkout).

- ``bastion-core`` alone: small, and its modules import no event loop, socket, database or
  framework library; with every extra, within its budget, and every example in
  ``examples/`` runs from it;
- ``bastion`` (with ``bastion-core``): the wheels install no top-level name but ``bastion``,
  no Node file and no build leftover, and the ``bastion`` command serves from the venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.harness import ADMIN_SECRET, CLIENT_ID, CLIENT_SECRET, free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints.txt"
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
#: What importing the embedded machines and engine must never load.
FORBIDDEN = (
    "trio", "anyio", "asyncio", "socket", "ssl", "sqlalchemy", "grpc", "starlette", "quart",
    "hypercorn",
)  # fmt: skip
CORE_LIMIT_BYTES = 5_000_000
CORE_ALL_EXTRAS_LIMIT_BYTES = 25_000_000
CORE_ALL_EXTRAS_LIMIT_DISTRIBUTIONS = 11


def _env() -> dict[str, str]:
    """The environment without anything that would put this checkout on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _venv(path: Path) -> Path:
    _run([sys.executable, "-m", "venv", str(path)], path.parent)
    return path / "bin" / "python"


def _pip_install(python: Path, *requirements: str) -> None:
    _run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "-c", str(CONSTRAINTS), *requirements],
        python.parent,
    )  # fmt: skip


INSTALLED_REPORT = """
import importlib.metadata as md, json
rows = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    if name.lower() in ("pip", "setuptools"):
        continue
    files = [str(f) for f in dist.files or []]
    rows[name.lower()] = {"bytes": sum(f.size or 0 for f in dist.files or []), "files": files}
print(json.dumps(rows))
"""


def _installed(python: Path) -> dict[str, dict[str, object]]:
    return json.loads(_run([str(python), "-c", INSTALLED_REPORT], python.parent))


#: Never part of a build: what a checkout accumulates beside its sources.
LEFT_BEHIND = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "vendor", "build", "dist", "*.egg-info", "__pycache__",
    ".*_cache", "tests", "bench",
)  # fmt: skip


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, built from a copy of the tree: setuptools builds in place, so two
    builds in one checkout (parallel test workers) would collide."""
    source = tmp_path_factory.mktemp("source") / "bastion"
    shutil.copytree(REPO, source, ignore=LEFT_BEHIND)
    out = tmp_path_factory.mktemp("wheels")
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
         "-w", str(out), str(source / "packages" / "bastion-core"), str(source)],
        source,
    )  # fmt: skip
    found = {path.name.split("-")[0]: path for path in out.glob("*.whl")}
    assert set(found) == {"bastion", "bastion_core"}, found
    return found


def test_each_wheel_holds_only_its_part_of_the_bastion_package(wheels: dict[str, Path]) -> None:
    core = zipfile.ZipFile(wheels["bastion_core"]).namelist()
    server = zipfile.ZipFile(wheels["bastion"]).namelist()
    for names, dist in ((core, "bastion_core"), (server, "bastion")):
        tops = {name.split("/")[0] for name in names}
        assert tops == {"bastion", f"{dist}-0.1.0.dist-info"}
        assert not [n for n in names if n.endswith((".pyc", "package.json", "-lock.json"))]
        assert not [n for n in names if "/vendor/" in n or "node_modules" in n]
    assert all(n.startswith(("bastion/core/", "bastion_core-")) for n in core)
    assert "bastion/core/fga/check.py" in core
    assert not [n for n in server if n.startswith("bastion/core/")], "core is bastion-core's"
    assert "bastion/__init__.py" not in core + server, "bastion is a namespace package"
    assert "bastion/transports/graphql/schema.graphql" in server
    assert "bastion/transports/pages/templates/login.html" in server


IMPORT_CHECK = """
import json, sys
import bastion.core.fga, bastion.core.state_machines
forbidden = set(json.loads(sys.argv[1]))
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules} & forbidden)))
"""


@pytest.fixture(scope="module")
def core_venv(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = _venv(tmp_path_factory.mktemp("core") / "venv")
    _pip_install(python, str(wheels["bastion_core"]))
    return python


def test_bastion_core_alone_is_small_and_imports_no_io(core_venv: Path) -> None:
    installed = _installed(core_venv)
    assert set(installed) == {"bastion-core", "idna", "pyotp"}
    total = sum(int(row["bytes"]) for row in installed.values())  # type: ignore[call-overload]
    assert total <= CORE_LIMIT_BYTES, f"{total:,} bytes installed"
    check = [str(core_venv), "-c", IMPORT_CHECK, json.dumps(FORBIDDEN)]
    assert json.loads(_run(check, core_venv.parent)) == []
    where = _run(
        [str(core_venv), "-c", "import bastion.core; print(bastion.core.__file__)"],
        core_venv.parent,
    )
    assert "site-packages" in where
    assert str(REPO) not in where


@pytest.fixture
def core_all_venv(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = _venv(tmp_path_factory.mktemp("core-all") / "venv")
    _pip_install(python, f"{wheels['bastion_core']}[all]")
    return python


def test_bastion_core_with_every_extra_stays_within_budget_and_runs_the_examples(
    core_all_venv: Path, tmp_path: Path
) -> None:
    installed = _installed(core_all_venv)
    total = sum(int(row["bytes"]) for row in installed.values())  # type: ignore[call-overload]
    assert total <= CORE_ALL_EXTRAS_LIMIT_BYTES, f"{total:,} bytes installed"
    assert len(installed) <= CORE_ALL_EXTRAS_LIMIT_DISTRIBUTIONS, sorted(installed)
    assert {"segno", "google-re2", "argon2-cffi"} <= set(installed)
    assert not {"sqlalchemy", "trio", "grpcio", "mini-racer"} & set(installed)
    # CEL runs on bastion's own parser, HMAC JWTs on the standard library
    assert not {"cel-python", "lark", "joserfc", "cryptography"} & set(installed)
    assert EXAMPLES
    for example in EXAMPLES:
        # Run from a directory of its own: the example sees the installed package only.
        script = tmp_path / example.name
        script.write_text(example.read_text())
        assert _run([str(core_all_venv), str(script)], tmp_path).strip(), example.name


@pytest.fixture
def server_venv(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = _venv(tmp_path_factory.mktemp("server") / "venv")
    _pip_install(python, str(wheels["bastion_core"]), str(wheels["bastion"]))
    return python


@pytest.fixture
def installed_server(server_venv: Path, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    bastion = server_venv.parent / "bastion"
    args = [
        str(bastion), "--host=127.0.0.1", f"--http-port={port}", f"--grpc-port={free_port()}",
        f"--metrics-port={free_port()}", "--database-type=sqlite",
        f"--database-url={tmp_path / 'wheel.db'}", f"--admin-secret={ADMIN_SECRET}",
        f"--client-id={CLIENT_ID}", f"--client-secret={CLIENT_SECRET}", "--jwt-type=HS256",
        "--jwt-secret=wheel-test-jwt-secret-0123456789",
    ]  # fmt: skip
    stderr = tmp_path / "server.stderr"
    with stderr.open("wb") as err:
        process = subprocess.Popen(args, cwd=tmp_path, env=_env(), stdout=err, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, stderr.read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(f"the installed server did not become ready:\n{stderr.read_text()}")
        yield url
    finally:
        process.terminate()
        process.wait(30)


def test_the_installed_wheels_own_only_bastion_and_serve(
    installed_server: str, server_venv: Path, tmp_path: Path
) -> None:
    installed = _installed(server_venv)
    for dist in ("bastion", "bastion-core"):
        files = installed[dist]["files"]
        tops = {str(f).split("/")[0] for f in files}  # type: ignore[attr-defined]
        assert {t for t in tops if not t.endswith(".dist-info") and t != ".."} == {"bastion"}
    owned = [f for d in ("bastion", "bastion-core") for f in installed[d]["files"]]  # type: ignore[attr-defined]
    shared = {f for f in owned if owned.count(f) > 1}
    assert shared == set(), "a file owned by both distributions"
    version = _run([str(server_venv.parent / "bastion"), "--version"], server_venv.parent)
    assert "0.1.0" in version
    with httpx.Client(base_url=installed_server, headers={"origin": installed_server}) as http:
        signed = http.post(
            "/v1/signup",
            json={"email": "wheel@example.com", "password": "Str0ng!pass",
                  "confirm_password": "Str0ng!pass"},
        )  # fmt: skip
        assert signed.status_code == 200, signed.text
        assert signed.json()["user"]["email"] == "wheel@example.com"
        meta = http.post("/graphql", json={"query": "{ meta { version } }"})
        assert meta.status_code == 200
        assert meta.json()["data"]["meta"]["version"]
        assert http.get("/playground").status_code == 503, "the wheel ships no npm bundle"
    # ... and start-up said so, with the ways to get one
    logged = (tmp_path / "server.stderr").read_text()
    assert "GraphiQL's browser bundles are not built in this installation" in logged
    assert "bash scripts/build_playground" in logged
