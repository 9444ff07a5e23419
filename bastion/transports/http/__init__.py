"""What the HTTP transports share: the ASGI application and its edge (CORS, CSRF, client
address, security headers), cookies on the wire, the error table, the route type.
Imports ``service`` and ``core``; never ``rest``, ``graphql`` or ``pages`` (they import it)."""
