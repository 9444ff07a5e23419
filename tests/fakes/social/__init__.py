"""Local stand-ins for the ten social identity providers (see :mod:`.server`)."""

from tests.fakes.social.server import FakeProvider, Person

__all__ = ["FakeProvider", "Person"]
