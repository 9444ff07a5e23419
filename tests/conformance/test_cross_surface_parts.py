"""The cross-surface suite's parts without a server: normal form, gRPC shapes, GraphQL
documents, and how the runner grades cells from the surfaces' answers."""

from __future__ import annotations

import base64
import json
import smtplib
from email.message import EmailMessage
from typing import Any

import pytest
from google.protobuf import json_format

from bastion.conformance import mailsink
from bastion.conformance.discovery import Deployment
from bastion.conformance.operations import OPERATIONS, Operation
from bastion.conformance.outcome import Credentials, Outcome, normal_form, parse_set_cookie
from bastion.conformance.pacing import Pacer, retry_safe_after
from bastion.conformance.runner import FAIL, NA, PASS, SKIP, run_scenario
from bastion.conformance.scenario import Ctx, Scenario
from bastion.conformance.sinks import parse_address
from bastion.conformance.surfaces.base import Surface, Unexpressible
from bastion.conformance.surfaces.graphql import bundled_schema, document
from bastion.conformance.surfaces.grpc import plain, proto_shaped
from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, authorizer_pb2
from tests.server.harness import free_port


def test_normal_form_drops_proto3_defaults_and_masks_what_varies() -> None:
    outcome = Outcome(
        ok=True,
        body={
            "message": "hi cfabc",
            "access_token": "eyJ...",
            "id_token": None,
            "truncated": False,
            "users": [],
            "user": {"id": "u-1", "email": "cfabcu1@x.test", "roles": ["user"], "age": 0},
        },
    )
    assert normal_form(outcome, ("cfabc",)) == {
        "ok": True,
        "body": {
            "message": "hi <unique>",
            "access_token": "<varies>",
            "user": {"id": "<varies>", "email": "<unique>u1@x.test", "roles": ["user"]},
        },
    }
    error = Outcome(ok=False, code="not_found", message="no cfabc here")
    assert normal_form(error, ("cfabc",)) == {
        "ok": False,
        "error": {"code": "not_found", "message": "no <unique> here"},
    }


def test_set_cookie_values_and_clearing() -> None:
    set_ = parse_set_cookie("service-admin=abc; Path=/; Max-Age=3600; HttpOnly")
    cleared = parse_set_cookie("service-admin=; Path=/; Max-Age=0")
    expired = parse_set_cookie("s=x; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/")
    assert set_ is not None
    assert (set_.name, set_.value, set_.cleared) == ("service-admin", "abc", False)
    assert cleared is not None
    assert cleared.cleared
    assert expired is not None
    assert expired.cleared
    outcome = Outcome(ok=True, cookies=(set_,))
    assert normal_form(outcome)["cookies"] == {"service-admin": "set"}


def test_grpc_requests_wrap_app_data_and_refuse_a_zero_proto3_cannot_send() -> None:
    descriptor = admin_pb2.AddWebhookRequest.DESCRIPTOR
    shaped = proto_shaped({"event_name": "user.login", "headers": {"a": "b"}}, descriptor)
    assert shaped == {"event_name": "user.login", "headers": {"value": {"a": "b"}}}
    message = json_format.ParseDict(shaped, admin_pb2.AddWebhookRequest())
    assert plain(message) == {"event_name": "user.login", "headers": {"a": "b"}}
    with pytest.raises(Unexpressible, match="page=0"):
        proto_shaped({"pagination": {"page": 0, "limit": 10}}, admin_pb2.WebhooksRequest.DESCRIPTOR)


def test_grpc_responses_become_rest_dicts() -> None:
    response = admin_pb2.TestEndpointResponse(http_status=200, response="ok")
    assert plain(response) == {"http_status": 200, "response": "ok"}  # int64, not "200"
    listed = authorizer_pb2.ListPermissionsResponse(objects=["doc:1"], truncated=False)
    assert plain(listed) == {"objects": ["doc:1"]}


def test_graphql_documents_select_every_field_and_bind_the_request() -> None:
    schema = bundled_schema()
    query, variables = document(schema, "_admin_meta", {})
    assert query == "query { _admin_meta { roles default_roles protected_roles } }"
    assert variables == {}
    query, variables = document(schema, "_revoke_access", {"user_id": "u"})
    assert query.startswith("mutation ($p: UpdateAccessRequest!) { _revoke_access(param: $p)")
    assert variables == {"p": {"user_id": "u"}}
    signup, _ = document(schema, "signup", {"email": "e"})
    assert "user { id email" in signup
    with pytest.raises(Unexpressible):
        document(schema, "_fga_reset", {"unexpected": 1})


class Scripted:
    """A surface that answers from a script: operation name -> outcome."""

    def __init__(self, name: str, answers: dict[str, Outcome]) -> None:
        self.name, self.answers = name, answers

    def call(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        return self.answers[operation.name]

    def close(self) -> None:
        return


def _meta_scenario(ctx: Ctx) -> None:
    ctx.expect_ok(ctx.call("meta"))


def _grade(
    answers: dict[str, Outcome], surfaces: tuple[str, ...] = ("rest", "graphql", "grpc")
) -> Any:
    scenario = Scenario("meta", _meta_scenario, surfaces=surfaces)
    clients: dict[str, Surface | None] = {
        name: Scripted(name, {"meta": answer}) for name, answer in answers.items()
    }
    return run_scenario(scenario, clients, Deployment("http://x", "s", "c", None))


def test_the_surface_unlike_the_majority_fails_and_every_answer_is_shown() -> None:
    same = Outcome(ok=True, body={"client_id": "c"})
    other = Outcome(ok=True, body={"client_id": "d"})
    result = _grade({"rest": same, "graphql": same, "grpc": other})
    assert {n: c.status for n, c in result.cells.items()} == {
        "rest": PASS,
        "graphql": PASS,
        "grpc": FAIL,
    }
    (disagreement,) = result.disagreements
    assert disagreement.step == "step 1 (meta)"
    assert '"client_id": "d"' in disagreement.answers["grpc"]
    assert '"client_id": "c"' in disagreement.answers["rest"]


def test_two_surfaces_that_differ_both_fail_and_rows_that_do_not_apply_are_na() -> None:
    result = _grade(
        {
            "rest": Outcome(ok=False, code="permission_denied", message="m"),
            "graphql": Outcome(ok=False, code="invalid_argument", message="m"),
            "grpc": Outcome(ok=True),
        },
        surfaces=("rest", "graphql"),
    )
    assert [result.cells[n].status for n in ("rest", "graphql", "grpc")] == [FAIL, FAIL, NA]


def test_an_operation_offered_nowhere_skips_by_name_and_somewhere_fails() -> None:
    missing = Outcome(ok=False, code="unimplemented", offered=False)
    nowhere = _grade({"rest": missing, "graphql": missing, "grpc": missing})
    assert {c.status for c in nowhere.cells.values()} == {SKIP}
    assert nowhere.cells["grpc"].detail == "meta is not offered on grpc"
    partly = _grade({"rest": Outcome(ok=True), "graphql": Outcome(ok=True), "grpc": missing})
    assert partly.cells["grpc"].status == FAIL
    assert "other surfaces offer it" in partly.cells["grpc"].detail


def test_every_operation_names_a_real_grpc_method_and_graphql_field() -> None:
    schema = bundled_schema()
    fields = {
        **schema.query_type.fields,
        **(schema.mutation_type.fields if schema.mutation_type else {}),
    }  # type: ignore[union-attr]
    services = {
        "AuthorizerService": authorizer_pb2.DESCRIPTOR.services_by_name["AuthorizerService"],
        "AuthorizerAdminService": admin_pb2.DESCRIPTOR.services_by_name["AuthorizerAdminService"],
    }
    for operation in OPERATIONS.values():
        assert operation.graphql_field in fields, operation
        assert operation.grpc_method in services[operation.grpc_service].methods_by_name, operation


def _jwt(claims: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJIUzI1NiJ9.{payload}.c2lnbmF0dXJl"


def test_the_mail_sink_speaks_smtp_and_hands_out_each_link_token_once() -> None:
    reset, signup = _jwt({"token_type": "forgot_password"}), _jwt({"token_type": "x"})
    running = mailsink.start(f"127.0.0.1:{free_port()}")
    try:
        sink = running.sink
        assert mailsink.current() is sink
        with smtplib.SMTP(sink.host, sink.port) as client:
            for token in (signup, reset):
                mail = EmailMessage()
                mail["From"], mail["To"], mail["Subject"] = "a@x.test", "Who@X.test", "link"
                # A line that starts with a dot is dot-stuffed on the wire.
                mail.set_content(f".first\nOpen https://x.test/verify?token={token}&r=1\n")
                mail.add_alternative(f'<a href="https://x.test/?a=1&amp;token={token}">go</a>')
                client.send_message(mail)
        assert sink.next_token("who@x.test", "forgot_password") == reset
        assert sink.next_token("who@x.test", "x") == signup
        body = sink.received["who@x.test"][0].get_body(("plain",))
        assert body is not None
        assert body.get_content().startswith(".first\r\n")
        with pytest.raises(mailsink.NoMail, match=r"no forgot_password mail to who@x\.test"):
            sink.next_token("who@x.test", "forgot_password", timeout=0)
    finally:
        running.stop()
    assert mailsink.current() is None


def test_the_mail_sink_reads_links_and_addresses() -> None:
    mail = EmailMessage()
    mail.set_content("no link here")
    assert mailsink.link_token(mail) is None
    assert mailsink.token_kind("not-a-jwt") is None
    assert mailsink.token_kind(_jwt({"token_type": "invite_member"})) == "invite_member"
    assert parse_address("mail.internal:2525", "--mail-sink") == ("mail.internal", 2525)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("2525", "--mail-sink")


def test_the_mail_sink_reads_one_time_codes_but_not_links_or_colours() -> None:
    code = EmailMessage()
    code.set_content("Your one-time code: 042917\n")
    code.add_alternative('<p style="color:#123456">Your code: <b>042917</b></p>')
    assert mailsink.one_time_code(code) == "042917"
    link = EmailMessage()
    link.set_content(f"Open https://x.test/verify?token={_jwt({'token_type': 'x'})} 123456")
    assert mailsink.one_time_code(link) is None
    colour = EmailMessage()
    colour.set_content("")
    colour.add_alternative('<p style="color:#123456">no code</p>')
    assert mailsink.one_time_code(colour) is None


def test_masked_lists_compare_by_length() -> None:
    body = {"authenticator_recovery_codes": ["A", "B"], "roles": ["user"]}
    masked = frozenset({"authenticator_recovery_codes"})
    assert normal_form(Outcome(ok=True, body=body), (), masked)["body"] == {
        "authenticator_recovery_codes": ["<varies>", "<varies>"],
        "roles": ["user"],
    }


def test_the_pacer_waits_out_marked_refusals_only() -> None:
    slept: list[float] = []
    pacer = Pacer(sleep=slept.append)
    answers = iter(
        [
            Outcome(ok=False, code="resource_exhausted", retry_safe_after=2.0),
            Outcome(ok=False, code="resource_exhausted", retry_safe_after=1.0),
            Outcome(ok=True, body={"n": 1}),
        ]
    )
    assert pacer.send(lambda: next(answers)).body == {"n": 1}
    assert pacer.waits == 2
    assert slept == pytest.approx([2.05, 1.05])
    # Unmarked refusals, and every refusal for a row about throttles, are the answer.
    unmarked = Outcome(ok=False, code="resource_exhausted")
    assert pacer.send(lambda: unmarked) is unmarked
    marked = Outcome(ok=False, code="resource_exhausted", retry_safe_after=1.0)
    assert pacer.send(lambda: marked, sees_throttles=True) is marked
    assert pacer.waits == 2
    assert retry_safe_after("3", "before-effect") == 3.0
    assert retry_safe_after("3", None) is None
    assert retry_safe_after("soon", "before-effect") is None


def test_the_pacer_keeps_under_max_rps() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    pacer = Pacer(max_rps=4, sleep=sleep, clock=lambda: now[0])
    for _ in range(3):
        pacer.send(lambda: Outcome(ok=True))
    assert slept == pytest.approx([0.25, 0.25])
