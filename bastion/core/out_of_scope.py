"""Authorizer's admin operations bastion leaves out on purpose (architecture.md):
organisations and their members, domains and OIDC/SAML connections, service-account
clients, trusted issuers, the SAML identity provider and SCIM.

Each is named as Authorizer's newer schema does, the GraphQL root field without its
leading underscore, which is also the last step of its REST path (``/v1/admin/<name>``).
Every surface answers them ``unimplemented`` (REST 501, GraphQL code ``unimplemented``,
gRPC UNIMPLEMENTED as for any method it does not serve), never "not found" or a
validation error, so a client can tell "not offered" from "mistyped".
"""

from __future__ import annotations

from typing import Final

__all__ = ["OUT_OF_SCOPE_MESSAGE", "OUT_OF_SCOPE_OPERATIONS", "is_out_of_scope"]

OUT_OF_SCOPE_MESSAGE: Final = (
    "not offered by bastion: organisations, clients, trusted issuers, SAML, SCIM "
    "and domains are out of scope"
)

OUT_OF_SCOPE_OPERATIONS: Final[frozenset[str]] = frozenset(
    {
        # service-account clients
        "create_client", "update_client", "delete_client", "rotate_client_secret",
        "client", "clients",
        # trusted issuers
        "add_trusted_issuer", "update_trusted_issuer", "delete_trusted_issuer",
        "trusted_issuer", "trusted_issuers",
        # the SAML identity provider
        "create_saml_service_provider", "update_saml_service_provider",
        "delete_saml_service_provider", "saml_service_provider", "saml_service_providers",
        "list_saml_service_providers", "rotate_saml_idp_cert", "retire_saml_idp_key",
        "saml_idp_keys", "list_saml_idp_keys", "import_saml_sp_metadata",
        # organisations, members, domains and their connections
        "user_organizations", "request_org_domain", "verify_org_domain",
        "add_verified_org_domain", "delete_org_domain", "org_domains",
        "create_organization", "update_organization", "delete_organization",
        "add_org_member", "remove_org_member", "organization", "organizations",
        "org_members", "create_org_oidc_connection", "update_org_oidc_connection",
        "delete_org_oidc_connection", "org_oidc_connection", "create_org_saml_connection",
        "update_org_saml_connection", "delete_org_saml_connection", "org_saml_connection",
        # SCIM
        "create_scim_endpoint", "rotate_scim_token", "delete_scim_endpoint", "scim_endpoint",
    }
)  # fmt: skip


def is_out_of_scope(name: str) -> bool:
    """``name``: a GraphQL root field (``_create_client``) or an operation name."""
    return name.removeprefix("_") in OUT_OF_SCOPE_OPERATIONS
