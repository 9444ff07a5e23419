"""``--custom-access-token-script``: extra claims in access and ID tokens, never overriding
ours, and a runaway script costs only its own claims."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import base_flags, running
from tests.server.test_auth_flows import client_for, new_user, validate

SCRIPT = """function (user, tokenPayload) {
  return {tenant: "acme-" + user.email.split("@")[1], sub: "evil", roles: ["admin"],
          exp: 1, iss: "https://evil.example", saw_type: tokenPayload.token_type};
}"""


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


def test_script_claims_are_merged_but_never_override_ours(tmp_path: Path) -> None:
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path)),
        f"--custom-access-token-script={SCRIPT}",
    ]
    with running(flags, tmp_path) as srv, client_for(srv) as client:
        _, tokens = new_user(client)
        access, id_claims = _claims(tokens["access_token"]), _claims(tokens["id_token"])
        assert access["tenant"] == "acme-example.com"
        assert access["saw_type"] == "access_token"
        assert id_claims["tenant"] == "acme-example.com"
        assert id_claims["saw_type"] == "id_token"
        for claims in (access, id_claims):
            assert claims["sub"] != "evil"
            assert claims["iss"] == srv.url
            assert claims["exp"] > 1
        assert access["roles"] == ["user"]
        assert validate(client, tokens["access_token"]).status_code == 200


def test_a_runaway_script_still_issues_the_token(tmp_path: Path) -> None:
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path)),
        "--custom-access-token-script=function (user, tokenPayload) { while (true) {} }",
    ]
    with running(flags, tmp_path) as srv, client_for(srv) as client:
        _, tokens = new_user(client)
        claims = _claims(tokens["access_token"])
        assert "tenant" not in claims
        assert validate(client, tokens["access_token"]).status_code == 200
