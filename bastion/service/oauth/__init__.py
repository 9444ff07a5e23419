"""The OAuth 2.0 / OpenID Connect provider: ``/authorize`` decisions, the
``authorization_code`` grant, introspection, userinfo, RP-initiated and back-channel
logout. The rules live in :mod:`core.oauth` and :mod:`core.state_machines.oauth_authorize`;
the HTTP endpoints in :mod:`transports.rest.oauth`. The facade is
:class:`service.oauth.service.OAuthService`.
"""
