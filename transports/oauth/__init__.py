"""The OAuth 2.0 / OpenID Connect provider endpoints (issue 10).

``/authorize``, the ``authorization_code`` grant of ``/oauth/token``, ``/oauth/introspect``,
``/userinfo``, RP-initiated ``/logout``, back-channel logout, discovery and JWKS. The
rules live in :mod:`core.oauth` and :mod:`core.state_machines.oauth_authorize`.
"""
