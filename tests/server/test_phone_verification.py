"""``--enable-phone-verification``: a phone number is proved by a texted code, at signup
and at every phone login until it is, end to end against a SQLite server and the local
fake of the SMS provider (MFA itself stays off)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.core.auth import otp
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.fakes.twilio import FakeTwilio
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.test_auth_flows import PASSWORD, bearer, client_for, signup, unique_email
from tests.server.test_mfa_email import mfa_cookie, set_cookies
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

SIGNUP_OTP_SENT = "Please check the OTP in your inbox"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTwilio]:
    with FakeTwilio() as twilio:
        yield twilio


@pytest.fixture(scope="module")
def server(fake: FakeTwilio, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("phone-verification")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp, "phoneverify")),
        *sms_flags(fake),
        "--app-cookie-secure=false",
        "--enable-phone-verification",
    ]
    with running(flags, tmp) as srv:
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with client_for(server) as c:
        yield c


def admin_user(client: httpx.Client, phone: str) -> dict[str, object]:
    listed = client.post(
        "/v1/admin/users",
        json={"pagination": {"limit": 100}},
        headers={"x-service-admin-secret": ADMIN_SECRET},
    )
    assert listed.status_code == 200, listed.text
    (found,) = [u for u in listed.json()["users"] if u.get("phone_number") == phone]
    return found


def test_phone_signup_texts_a_code_and_the_code_finishes_the_signup(
    fake: FakeTwilio, client: httpx.Client
) -> None:
    phone = unique_phone()
    created = phone_signup(client, phone)
    assert created.status_code == 200, created.text
    assert created.json()["message"] == SIGNUP_OTP_SENT
    assert created.json()["should_show_mobile_otp_screen"] is True
    assert not created.json().get("access_token")
    cookies = set_cookies(created)
    assert "cookie_session" not in cookies
    assert f"Max-Age={otp.PHONE_VERIFICATION_TTL}" in cookies["mfa"]
    assert admin_user(client, phone)["phone_number_verified"] is False
    cookie, code = mfa_cookie(created), code_in(texts_to(fake, phone)[0])
    assert verify(client, phone, other_code(code), cookie).json()["message"] == "invalid otp"
    done = verify(client, phone, code, cookie)
    assert done.status_code == 200, done.text
    assert done.json()["user"]["phone_number_verified"] is True
    assert done.json()["access_token"]
    assert admin_user(client, phone)["phone_number_verified"] is True
    # verified: the password alone logs in now, and nothing more is texted
    again = phone_login(client, phone)
    assert again.json()["message"] == "Logged in successfully"
    assert sent_count(fake, phone) == 1


def test_an_unverified_phone_gets_a_code_at_login_after_the_password(
    fake: FakeTwilio, client: httpx.Client
) -> None:
    phone = unique_phone()
    assert phone_signup(client, phone).status_code == 200
    texts_to(fake, phone)
    wrong = phone_login(client, phone, password="Wr0ng!password")
    assert wrong.status_code == 401
    assert wrong.json()["message"] == "invalid credentials"
    response = phone_login(client, phone)
    assert response.status_code == 200, response.text
    assert response.json()["should_show_mobile_otp_screen"] is True
    assert not response.json().get("access_token")
    (_, text) = texts_to(fake, phone, 2)  # the signup's and this login's; none for the wrong one
    assert sent_count(fake, phone) == 2
    done = verify(client, phone, code_in(text), mfa_cookie(response))
    assert done.status_code == 200, done.text
    token = done.json()["access_token"]
    assert client.get("/v1/profile", headers=bearer(token)).json()["phone_number_verified"]


def test_a_changed_number_is_unverified_until_its_code_proves_it(
    fake: FakeTwilio, client: httpx.Client
) -> None:
    phone, new_phone = unique_phone(), unique_phone()
    created = phone_signup(client, phone)
    done = verify(client, phone, code_in(texts_to(fake, phone)[0]), mfa_cookie(created))
    token = done.json()["access_token"]
    assert admin_user(client, phone)["phone_number_verified"] is True
    changed = client.post(
        "/v1/update_profile", json={"phone_number": new_phone}, headers=bearer(token)
    )
    assert changed.status_code == 200, changed.text
    assert admin_user(client, new_phone)["phone_number_verified"] is False
    # The next login by the new number texts it a code; the code proves it.
    response = phone_login(client, new_phone)
    assert response.json()["should_show_mobile_otp_screen"] is True
    assert not response.json().get("access_token")
    proved = verify(client, new_phone, code_in(texts_to(fake, new_phone)[0]), mfa_cookie(response))
    assert proved.status_code == 200, proved.text
    assert admin_user(client, new_phone)["phone_number_verified"] is True


def test_email_signups_are_not_asked_for_a_phone_code(client: httpx.Client) -> None:
    created = signup(client, unique_email("phone-verify-email"))
    assert created.status_code == 200
    assert created.json()["message"] == "Signed up successfully."


def test_grpc_phone_signup_and_verify_otp(fake: FakeTwilio, server: ServerProcess) -> None:
    phone = unique_phone()
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        answer, call = stub.Signup.with_call(
            authorizer_pb2.SignupRequest(
                phone_number=phone, password=PASSWORD, confirm_password=PASSWORD
            )
        )
        assert answer.should_show_mobile_otp_screen
        assert answer.message == SIGNUP_OTP_SENT
        cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
        cookie = next(c for c in cookies if c.startswith("mfa=")).split(";", 1)[0]
        code = code_in(texts_to(fake, phone)[0])
        done = stub.VerifyOtp(
            authorizer_pb2.VerifyOtpRequest(phone_number=phone, otp=code),
            metadata=(("cookie", cookie),),
        )
        assert done.access_token
        assert done.user.phone_number_verified
