"""Social login, the pure parts: provider descriptions, profile normalisation, the pending
login that spans the round trip to the provider, and the checks on what comes back.

The HTTP exchanges live in ``service.social``; the account decisions (create, link,
refuse) in ``core.state_machines.social_login``.
"""
