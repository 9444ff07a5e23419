"""gRPC over HTTP/2 in bytes: what a request's headers say, the reply's headers and
trailers, and the 5-byte prefix of every message (a compressed flag and a length)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from bastion.transports.grpc.calls import Metadata, Status

PREFIX = struct.Struct(">BI")
REPLY_HEADERS = [(b":status", b"200"), (b"content-type", b"application/grpc")]
_UNITS = {ord("H"): 3600.0, ord("M"): 60.0, ord("S"): 1.0, ord("m"): 1e-3, ord("u"): 1e-6,
          ord("n"): 1e-9}  # fmt: skip


@dataclass(slots=True)
class Request:
    """A call's request headers: gRPC's own, and the caller's metadata by lower-case key
    (a repeated key keeps its last value; a ``-bin`` value is base64-decoded bytes)."""

    path: bytes = b""
    verb: bytes = b""
    kind: bytes = b""
    timeout: bytes = b""
    encoding: bytes = b""
    metadata: dict[str, str | bytes] = field(default_factory=dict)

    @classmethod
    def read(cls, headers: Iterable[tuple[bytes | str, bytes | str]]) -> Request:
        asked = cls()
        metadata = asked.metadata
        for raw_name, raw_value in headers:
            name, value = _bytes(raw_name), _bytes(raw_value)
            if name[:1] == b":":
                if name == b":path":
                    asked.path = value
                elif name == b":method":
                    asked.verb = value
            elif name == b"content-type":
                asked.kind = value
            elif name == b"grpc-timeout":
                asked.timeout = value
            elif name == b"grpc-encoding":
                asked.encoding = value
            elif name != b"te" and not name.startswith(b"grpc-"):
                key = name.decode("latin-1").lower()
                if key.endswith("-bin"):
                    try:
                        metadata[key] = base64.b64decode(value + b"=" * (-len(value) % 4))
                    except ValueError:
                        continue  # not base64: dropped, as a malformed header
                else:
                    metadata[key] = value.decode("utf-8", "replace")
        return asked


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1")


def parse_timeout(value: bytes) -> float | None:
    """``grpc-timeout`` in seconds (up to 8 digits and a unit), or None if malformed."""
    unit = _UNITS.get(value[-1]) if value else None
    digits = value[:-1]
    if unit is None or not digits.isdigit() or len(digits) > 8:
        return None
    return int(digits) * unit


def _percent(message: str) -> bytes:
    """``grpc-message``: UTF-8, every byte outside printable ASCII, and ``%``, as %XX."""
    raw = message.encode()
    if all(32 <= b < 127 and b != 37 for b in raw):
        return raw
    return b"".join(bytes((b,)) if 32 <= b < 127 and b != 37 else b"%%%02X" % b for b in raw)


def encoded(metadata: Metadata) -> list[tuple[bytes, bytes]]:
    """Metadata as header fields; a ``-bin`` value base64 without padding."""
    out = []
    for key, value in metadata:
        data = value if isinstance(value, bytes) else value.encode()
        if key.endswith("-bin"):
            data = base64.b64encode(data).rstrip(b"=")
        out.append((key.encode(), data))
    return out


def status_headers(status: Status, message: str) -> list[tuple[bytes, bytes]]:
    """The trailers that end a call: ``grpc-status``, and ``grpc-message`` if any."""
    trailers = [(b"grpc-status", b"%d" % status)]
    if message:
        trailers.append((b"grpc-message", _percent(message)))
    return trailers
