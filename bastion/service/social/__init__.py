"""Social login through the configured providers: the authorization request, the
callback's code exchange and profile, and the session that follows. The HTTP endpoints
are :mod:`transports.rest.social`; the facade is :class:`service.social.service.SocialLogin`.
"""
