"""Password reset by SMS code (``forgot_password`` / ``reset_password`` with
``phone_number``), end to end against a SQLite server and the local fake of the SMS
provider; and a text that survives the provider being down, through the outbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.fakes.twilio import FakeTwilio
from tests.server.harness import ServerProcess, base_flags, running
from tests.server.test_auth_flows import NEW_PASSWORD, PASSWORD, bearer, client_for
from tests.server.test_mfa_email import mfa_cookie, set_cookies, with_mfa
from tests.server.test_mfa_sms import (
    code_in,
    other_code,
    phone_login,
    phone_signup,
    sent_count,
    sms_flags,
    texts_to,
    unique_phone,
    verify,
)

CODE_SENT = {
    "message": "Please enter the OTP sent to your phone number and change your password.",
    "should_show_mobile_otp_screen": True,
}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTwilio]:
    with FakeTwilio() as twilio:
        yield twilio


@pytest.fixture(scope="module")
def server(fake: FakeTwilio, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("phone-reset")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp, "phonereset")),
        *sms_flags(fake),
        "--app-cookie-secure=false",
    ]
    with running(flags, tmp) as srv:
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with client_for(server) as c:
        yield c


def forgot(client: httpx.Client, phone: str) -> httpx.Response:
    return client.post("/v1/forgot_password", json={"phone_number": phone})


def reset(
    client: httpx.Client,
    phone: str,
    code: str,
    cookie: str | None,
    password: str = NEW_PASSWORD,
    confirm: str | None = None,
) -> httpx.Response:
    body = {
        "phone_number": phone,
        "otp": code,
        "password": password,
        "confirm_password": confirm if confirm is not None else password,
    }
    return client.post(
        "/v1/reset_password", json=body, headers=with_mfa(cookie) if cookie else None
    )


def registered(client: httpx.Client) -> tuple[str, str]:
    """A phone user with a live session: the number and its access token."""
    phone = unique_phone()
    created = phone_signup(client, phone)
    assert created.status_code == 200, created.text
    return phone, created.json()["access_token"]


def cookie_shape(response: httpx.Response) -> list[str]:
    """The mfa cookies' attributes, without their values nor their ``Expires`` date (two
    answers a second apart differ there; ``Max-Age`` says the same)."""
    cookies = set_cookies(response)
    shapes = []
    for name, value in cookies.items():
        attributes = [a.strip() for a in value.split(";")[1:]]
        kept = "; ".join(a for a in attributes if not a.lower().startswith("expires="))
        shapes.append(f"{name}: {kept}")
    return sorted(shapes)


def test_reset_by_code_sets_the_password_and_ends_other_sessions(
    fake: FakeTwilio, client: httpx.Client
) -> None:
    phone, token = registered(client)
    asked = forgot(client, phone)
    assert asked.status_code == 200, asked.text
    assert asked.json() == CODE_SENT
    cookie, code = mfa_cookie(asked), code_in(texts_to(fake, phone)[0])
    assert reset(client, phone, other_code(code), cookie).json()["message"] == "invalid otp"
    mismatch = reset(client, phone, code, cookie, confirm="Other!passw0rd")
    assert mismatch.status_code == 400
    assert mismatch.json()["message"] == "passwords don't match"
    # a password-reset code is no login code
    assert verify(client, phone, code, cookie).json()["message"] == "invalid session"
    done = reset(client, phone, code, cookie)  # the right code was not spent by the mismatch
    assert done.status_code == 200, done.text
    assert done.json() == {"message": "Password updated successfully."}
    assert "Max-Age=0" in set_cookies(done)["mfa"]
    assert client.get("/v1/profile", headers=bearer(token)).status_code == 401
    assert phone_login(client, phone).status_code == 401
    assert phone_login(client, phone, NEW_PASSWORD).json()["access_token"]
    again = reset(client, phone, code, cookie, password=PASSWORD)
    assert again.status_code == 401
    assert again.json()["message"] == "invalid session"


def test_unknown_numbers_get_the_same_answer_and_nothing_is_texted(
    fake: FakeTwilio, client: httpx.Client
) -> None:
    phone, _ = registered(client)
    known = forgot(client, phone)
    unknown_phone = unique_phone()
    unknown = forgot(client, unknown_phone)
    assert unknown.status_code == known.status_code == 200
    assert unknown.json() == known.json() == CODE_SENT
    assert cookie_shape(unknown) == cookie_shape(known)
    texts_to(fake, phone)
    refused = reset(client, unknown_phone, "123456", mfa_cookie(unknown))
    assert refused.status_code == 401
    assert refused.json()["message"] == "invalid session"
    assert sent_count(fake, unknown_phone) == 0


def test_reset_codes_are_throttled_per_number_known_or_not(
    fake: FakeTwilio, client: httpx.Client
) -> None:
    phone, _ = registered(client)
    unknown_phone = unique_phone()
    for number in (phone, unknown_phone):
        assert forgot(client, number).status_code == 200
        again = forgot(client, number)
        assert again.status_code == 429
        assert again.json()["message"] == "please wait before requesting another code"
        assert again.headers["retry-after"] == "30"
    texts_to(fake, phone)
    assert sent_count(fake, phone) == 1


def test_reset_by_code_checks_its_inputs(client: httpx.Client) -> None:
    phone, _ = registered(client)
    cookie = mfa_cookie(forgot(client, phone))
    no_phone = client.post(
        "/v1/reset_password",
        json={"otp": "123456", "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
        headers=with_mfa(cookie),
    )
    assert no_phone.status_code == 400
    assert no_phone.json()["message"] == "phone number is required"
    no_cookie = reset(client, phone, "123456", None)
    assert no_cookie.status_code == 401
    assert no_cookie.json()["message"] == "invalid session"
    other_number = reset(client, unique_phone(), "123456", cookie)
    assert other_number.status_code == 401
    bad_number = forgot(client, "12")
    assert bad_number.status_code == 400
    assert bad_number.json()["message"] == "invalid phone number"


def test_grpc_forgot_and_reset_password_by_code(fake: FakeTwilio, server: ServerProcess) -> None:
    with client_for(server) as client:
        phone, _ = registered(client)
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        answer, call = stub.ForgotPassword.with_call(
            authorizer_pb2.ForgotPasswordRequest(phone_number=phone)
        )
        assert answer.should_show_mobile_otp_screen
        cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
        cookie = next(c for c in cookies if c.startswith("mfa=")).split(";", 1)[0]
        code = code_in(texts_to(fake, phone)[0])
        request = authorizer_pb2.ResetPasswordRequest(
            phone_number=phone, otp=code, password=NEW_PASSWORD, confirm_password=NEW_PASSWORD
        )
        done = stub.ResetPassword(request, metadata=(("cookie", cookie),))
        assert done.message == "Password updated successfully."
        with pytest.raises(grpc.RpcError) as spent:
            stub.ResetPassword(request, metadata=(("cookie", cookie),))
        assert spent.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with client_for(server) as client:
        assert phone_login(client, phone, NEW_PASSWORD).json()["access_token"]


def test_a_text_refused_while_the_provider_is_down_is_delivered_later(tmp_path: Path) -> None:
    with FakeTwilio() as down:
        down.fail_next(503, 20500, "Service Unavailable", times=2)
        flags = [
            *base_flags("sqlite", fresh_sqlite_url(tmp_path, "smsdown")),
            *sms_flags(down),
            "--app-cookie-secure=false",
        ]
        with running(flags, tmp_path) as srv, client_for(srv) as client:
            phone, _ = registered(client)
            asked = forgot(client, phone)
            assert asked.status_code == 200  # answered at once: the text waits in the outbox
            code = code_in(texts_to(down, phone, timeout=60)[0])
            with down.lock:
                answered = [status for _, _, status in down.requests]
            assert answered == [503, 503, 201]
            assert reset(client, phone, code, mfa_cookie(asked)).status_code == 200
