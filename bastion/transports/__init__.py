"""The wire: ``http`` (the ASGI app and the edge every HTTP request passes: CORS, CSRF,
client address, security headers, cookies on the wire, the error table), ``rest``,
``graphql``, ``grpc`` and ``pages``.

A transport parses its wire form, calls a ``service`` facade and renders the reply; it
imports ``service`` and ``core``, the shared ``transports.http`` pieces, and never
another transport.
"""
