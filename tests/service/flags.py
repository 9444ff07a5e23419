"""The flags the service tests build their settings from."""

from __future__ import annotations

#: The flags a server cannot start without (the database ones overridden where a test
#: opens a real one).
REQUIRED = {
    "admin-secret": "a",
    "client-id": "client-1",
    "client-secret": "client-secret-1",
    "database-type": "sqlite",
    "database-url": "unused",
    "jwt-type": "HS256",
    "jwt-secret": "jwt-secret-of-some-length",
}
#: Mail goes nowhere (nothing listens on port 9): it stays queued in the outbox, where
#: the tests read it.
QUEUED_MAIL = {
    "url": "http://127.0.0.1:9",
    "smtp-host": "127.0.0.1",
    "smtp-port": "9",
    "smtp-sender-email": "bastion@example.com",
}
