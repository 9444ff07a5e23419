"""Reference pieces for embedding the flows: a synchronous in-memory driver and its store,
default password hashing and token signing, and the answers to the one-time-code effects.

They carry out every effect the machines of ``core.state_machines.MACHINES`` emit, so a
flow runs end to end in a few lines (``examples/``). Hashing needs ``argon2-cffi`` (the
``argon2`` extra), imported only when a hasher is made; the HMAC token signer is the
standard library's.
"""

from bastion.core.reference.codes import OtpCodes
from bastion.core.reference.driver import HANDLED, RelationCheck, SyncDriver
from bastion.core.reference.hashing import Argon2Hasher
from bastion.core.reference.memory import MemoryStore, Outbox
from bastion.core.reference.signing import JwtSigner
from bastion.core.reference.tokens import mint_tokens

__all__ = [
    "HANDLED",
    "Argon2Hasher",
    "JwtSigner",
    "MemoryStore",
    "OtpCodes",
    "Outbox",
    "RelationCheck",
    "SyncDriver",
    "mint_tokens",
]
