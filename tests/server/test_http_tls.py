"""HTTPS on the HTTP listener itself (``--tls-cert-file`` / ``--tls-key-file``), on bastion's
own server and on hypercorn: a real TLS client signs up and logs in; plain HTTP on that
port gets no answer; a certificate without its key, or a key of another pair, stops the
start with a message naming the flag."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from pathlib import Path

import httpx
import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.server.certificates import self_signed
from tests.server.harness import ServerProcess, base_flags, start_server

PASSWORD = "Tls!password1"


def trusting(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


def started_https(server: ServerProcess, cert: Path) -> str:
    url = f"https://127.0.0.1:{server.http_port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"server exited:\n{server.stderr()}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", verify=trusting(cert), timeout=2).status_code == 200:
                return url
        time.sleep(0.1)
    raise AssertionError(f"no HTTPS answer:\n{server.stderr()}")


@pytest.mark.parametrize("http_server", ["h11", "hypercorn"])
def test_the_http_listener_serves_https(tmp_path: Path, http_server: str) -> None:
    cert, key = self_signed(tmp_path)
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path)),
        f"--http-server={http_server}",
        f"--tls-cert-file={cert}",
        f"--tls-key-file={key}",
    ]
    server = start_server(flags, tmp_path, wait=False)
    try:
        url = started_https(server, cert)
        email = f"tls-{time.time_ns()}@example.com"
        with httpx.Client(base_url=url, verify=trusting(cert), headers={"origin": url}) as http:
            body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
            assert http.post("/v1/signup", json=body).status_code == 200
            login = http.post("/v1/login", json={"email": email, "password": PASSWORD})
            assert login.status_code == 200, login.text
            token = login.json()["access_token"]
            profile = http.get("/v1/profile", headers={"authorization": f"Bearer {token}"})
            assert profile.json()["email"] == email
        # Plain HTTP on the TLS port: the request is not answered as HTTP.
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as plain:
            plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            with contextlib.suppress(ConnectionResetError):
                answer = plain.recv(4096)
                assert not answer.startswith(b"HTTP/1.1 200"), answer
        # Nor does a client that trusts another certificate get through.
        other_cert, _ = self_signed(tmp_path, "other")
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/healthz", verify=trusting(other_cert), timeout=5)
    finally:
        server.terminate()


def test_a_certificate_and_a_key_of_different_pairs_stop_the_start(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path, "one")
    _, other_key = self_signed(tmp_path, "two")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path)),
        f"--tls-cert-file={cert}",
        f"--tls-key-file={other_key}",
    ]
    server = start_server(flags, tmp_path, wait=False)
    assert server.process.wait(60) != 0
    assert "--tls-key-file does not match the certificate of --tls-cert-file" in server.stderr()
    alone = start_server(
        [*base_flags("sqlite", fresh_sqlite_url(tmp_path, "alone")), f"--tls-cert-file={cert}"],
        tmp_path,
        wait=False,
        name="alone",
    )
    assert alone.process.wait(60) != 0
    assert "--tls-cert-file and --tls-key-file must be given together" in alone.stderr()
