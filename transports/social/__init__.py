"""Social login over HTTP: ``GET /oauth_login/<provider>`` and ``/oauth_callback/<provider>``
(see :mod:`transports.social.service`)."""
