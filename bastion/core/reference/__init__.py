"""Reference pieces for embedding the flows: the drivers and what they run over, default
password hashing and token signing, and the answers to the one-time-code effects.

``SyncDriver`` and ``AsyncDriver`` carry out every effect the machines of
``core.state_machines.MACHINES`` emit over any ``Storage`` / ``AsyncStorage`` (the few
operations of ``reference.storage``); ``MemoryStore`` is one in memory, and ``examples/``
has one over sqlite3. Hashing needs ``argon2-cffi`` (the ``argon2`` extra), imported only
when a hasher is made; ``AsyncDriver`` runs hashing in anyio's worker threads (the
``anyio`` extra) unless given its own ``offload``; the HMAC token signer is the standard
library's.
"""

from bastion.core.reference.async_driver import AsyncDriver, Offloader
from bastion.core.reference.codes import OtpCodes
from bastion.core.reference.driver import HANDLED, SyncDriver
from bastion.core.reference.engine import RelationCheck
from bastion.core.reference.hashing import Argon2Hasher
from bastion.core.reference.memory import MemoryStore, Outbox
from bastion.core.reference.signing import JwtSigner
from bastion.core.reference.storage import AsyncStorage, Kind, OutboxItem, Storage, UserKey
from bastion.core.reference.tokens import mint_tokens

__all__ = [
    "HANDLED",
    "Argon2Hasher",
    "AsyncDriver",
    "AsyncStorage",
    "JwtSigner",
    "Kind",
    "MemoryStore",
    "Offloader",
    "OtpCodes",
    "Outbox",
    "OutboxItem",
    "RelationCheck",
    "Storage",
    "SyncDriver",
    "UserKey",
    "mint_tokens",
]
