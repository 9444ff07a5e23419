"""OAuth 2.0 / OpenID Connect building blocks, one module per RFC (authlib's layout).

Pure like the rest of ``core``: parameter rules, PKCE, error codes and response shapes.
The authorize flow itself is :mod:`core.state_machines.oauth_authorize`.
"""
