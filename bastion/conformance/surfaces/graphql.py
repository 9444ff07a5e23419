"""POST /graphql over httpx: each operation becomes a document selecting every field.

The document is generated from Authorizer's schema (the SDL bastion ships): the root
field, its ``params`` (or ``param``) argument bound to a variable holding the REST
request, and a selection of every output field, nested objects included (a type is not
entered again below itself). Errors come back in the body; the first error's
``extensions.code`` and ``message`` are the outcome's.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Any

from graphql import (
    GraphQLField,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    build_schema,
    get_named_type,
)

from bastion.conformance.operations import DEPRECATED_GRAPHQL, Operation
from bastion.conformance.outcome import Credentials, Outcome
from bastion.conformance.pacing import http_wait
from bastion.conformance.surfaces.base import Unexpressible, round_robin
from bastion.conformance.surfaces.rest import http_clients, http_headers, response_cookies

#: What bastion's GraphQL surface answers for a root field with no operation behind it.
UNIMPLEMENTED_CODE = "unimplemented"


@cache
def bundled_schema() -> GraphQLSchema:
    """The server's SDL file, read as a file (bastion-conformance's wheel carries it
    without the server's GraphQL module)."""
    sdl = files("bastion.transports").joinpath("graphql", "schema.graphql")
    return build_schema(sdl.read_text(encoding="utf-8"))


#: Fields only GraphQL carries, by its clients' contract (Authorizer's newer schema): a
#: value the other surfaces answer under another name, so not compared.
GRAPHQL_ONLY_FIELDS = frozenset({("AdminMeta", "is_multi_factor_auth_service_enabled")})


#: Root fields answering a list where REST and gRPC answer ``{key: [...]}``.
LISTED_UNDER = {
    "webauthn_credentials": "webauthn_credentials",
    "_webauthn_credentials": "webauthn_credentials",
    "sessions": "sessions",
    "_user_sessions": "sessions",
}


def selection(named: GraphQLNamedType, seen: frozenset[str] = frozenset(), depth: int = 0) -> str:
    """``{ a b c { d } }`` for every field of an object type; "" for a leaf type."""
    if not isinstance(named, GraphQLObjectType):
        return ""
    if depth >= 5:
        return "{ __typename }"
    parts: list[str] = []
    for name, field in named.fields.items():
        if any(isinstance(arg.type, GraphQLNonNull) for arg in field.args.values()):
            continue
        if (named.name, name) in GRAPHQL_ONLY_FIELDS:
            continue
        inner = get_named_type(field.type)
        if isinstance(inner, GraphQLObjectType):
            if inner.name in seen:
                continue
            parts.append(f"{name} {selection(inner, seen | {named.name}, depth + 1)}")
        else:
            parts.append(name)
    return "{ " + " ".join(parts) + " }"


def document(
    schema: GraphQLSchema, field_name: str, request: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The GraphQL document and variables carrying ``request`` to root field ``field_name``."""
    for kind, root in (("query", schema.query_type), ("mutation", schema.mutation_type)):
        if root is None or field_name not in root.fields:
            continue
        field: GraphQLField = root.fields[field_name]
        select = selection(get_named_type(field.type))
        if not field.args:
            if request:
                raise Unexpressible(f"{field_name} takes no arguments on GraphQL")
            return f"{kind} {{ {field_name} {select} }}", {}
        if not ({"params", "param"} & set(field.args)):
            # Authorizer 2.4's passkey fields take the request's keys as plain arguments.
            unknown = set(request) - set(field.args)
            if unknown:
                raise Unexpressible(f"{field_name} has no argument {sorted(unknown)}")
            names = [n for n in field.args if n in request]
            declared = ", ".join(f"${n}: {field.args[n].type}" for n in names)
            passed = ", ".join(f"{n}: ${n}" for n in names)
            head = f"{kind} ({declared})" if names else kind
            call = f"{field_name}({passed})" if names else field_name
            return f"{head} {{ {call} {select} }}", {n: request[n] for n in names}
        ((arg_name, arg),) = field.args.items()
        return (
            f"{kind} ($p: {arg.type}) {{ {field_name}({arg_name}: $p) {select} }}",
            {"p": request},
        )
    raise Unexpressible(f"the GraphQL schema has no root field {field_name}")


class GraphQLSurface:
    name = "graphql"

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        verify: bool | ssl.SSLContext = True,
        schema: GraphQLSchema | None = None,
        origin: str | None = None,
    ) -> None:
        self._clients = http_clients(base_urls, verify)
        self._origin = origin
        self._next = round_robin(self._clients)
        self.schema = schema or bundled_schema()

    def call(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        query, variables = document(self.schema, operation.graphql_field, request)
        return self.execute(operation.graphql_field, query, variables, credentials)

    def execute(
        self, field_name: str, query: str, variables: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        client = next(self._next)
        client.cookies.clear()
        headers = http_headers(self._origin or str(client.base_url), credentials)
        method = credentials.http_method or "POST"
        payload = {"query": query, "variables": variables}
        if method == "GET":
            response = client.get("/graphql", params={"query": query}, headers=headers)
        else:
            response = client.request(method, "/graphql", json=payload, headers=headers)
        cookies = response_cookies(response)
        try:
            body = response.json()
        except ValueError:
            return Outcome(
                ok=False,
                code="unparseable",
                message=f"HTTP {response.status_code}: {response.text[:200]!r}",
                anomalies=(f"HTTP {response.status_code} with a body that is not JSON",),
            )
        if response.status_code != 200:
            # Refused before GraphQL ran (CSRF, method, rate limit): the HTTP error shape.
            return Outcome(
                ok=False,
                code=str(body.get("code", "")),
                message=str(body.get("message", "")),
                cookies=cookies,
                retry_safe_after=http_wait(response),
            )
        errors = body.get("errors") or []
        if errors:
            first = errors[0]
            code = str((first.get("extensions") or {}).get("code", ""))
            outcome = Outcome(
                ok=False, code=code, message=str(first.get("message", "")), cookies=cookies
            )
            if code == UNIMPLEMENTED_CODE and field_name not in DEPRECATED_GRAPHQL:
                outcome.offered = False
            return outcome
        data = (body.get("data") or {}).get(field_name)
        if field_name in LISTED_UNDER:  # a GraphQL list is REST's body under one key
            data = {LISTED_UNDER[field_name]: data}
        if not isinstance(data, dict):
            return Outcome(ok=False, code="unparseable", message=f"data.{field_name} = {data!r}")
        return Outcome(ok=True, body=data, cookies=cookies)

    def close(self) -> None:
        for client in self._clients:
            client.close()
