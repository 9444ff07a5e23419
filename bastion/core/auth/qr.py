"""QR codes for authenticator enrolment (``authenticator_scanner_image``).

The image is a PNG, base64-encoded WITHOUT a ``data:`` URL prefix (what Authorizer's
clients prepend themselves). segno builds it in memory; nothing touches a file. segno is
imported when a code is drawn: its writers import ``urllib.request`` (and with it ``socket``
and ``ssl``), which importing core must not.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from bastion.core.extras import import_extra

__all__ = ["png_base64"]

#: pixels per module; 5 keeps a typical otpauth URI around 200x200 px
_SCALE = 5


def png_base64(content: str) -> str:
    """The QR code of ``content`` as base64 PNG (error correction M, quiet zone 4)."""
    segno: Any = import_extra("segno", extra="qr", feature="a QR image")  # see the docstring

    buffer = io.BytesIO()
    segno.make_qr(content, error="m").save(buffer, kind="png", scale=_SCALE, border=4)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
