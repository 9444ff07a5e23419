"""The storage layer's own failure: a database or memory store that cannot be reached."""

from __future__ import annotations

from bastion.core.errors import Unavailable

__all__ = ["StorageUnavailable"]


class StorageUnavailable(Unavailable):
    """The database or the memory store did not answer (down, refused, timed out).

    A :class:`core.errors.Unavailable`, so every transport reports it as "unavailable"
    without knowing about storage. The message never carries credentials.
    """

    def __init__(self, message: str, *, store: str = "storage") -> None:
        """``store``: which one failed, as readiness names it (``database``, ``memory
        store``); ``storage`` when the failure does not say."""
        super().__init__(message)
        self.store = store
