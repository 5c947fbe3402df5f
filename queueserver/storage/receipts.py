"""Receipt handles: opaque, rotated on every receive, and unforgeable.

A handle names the queue, the message row and the receive's random token, signed
with a keyed BLAKE2b MAC under a per-database secret, so a client can neither make one up nor
turn one message's handle into another's.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import struct
from dataclasses import dataclass

_LAYOUT = struct.Struct(">qqq")
_MAC_BYTES = 16
_PAYLOAD_SIZE = _LAYOUT.size
_SIGNED_SIZE = _LAYOUT.size + _MAC_BYTES
# URL-safe base64 by hand: base64.urlsafe_b64* add ~0.2 us of Python around binascii per handle.
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


@dataclass(slots=True)
class Receipt:
    queue_id: int
    row_id: int
    token: int


class ReceiptSigner:
    def __init__(self, secret: bytes) -> None:
        # Keyed BLAKE2b is a MAC on its own (no HMAC construction needed), and copying a keyed
        # one costs 0.4 us a handle against 1.1 us for a copied HMAC-SHA256.
        self._keyed = hashlib.blake2b(key=secret, digest_size=_MAC_BYTES)

    def _mac(self, payload: bytes) -> bytes:
        mac = self._keyed.copy()
        mac.update(payload)
        return mac.digest()

    def encode(self, queue_id: int, row_id: int, token: int) -> str:
        payload = _LAYOUT.pack(queue_id, row_id, token)
        mac = self._keyed.copy()  # _mac inline: this runs for every message received
        mac.update(payload)
        return binascii.b2a_base64(payload + mac.digest(), newline=False).translate(_TO_URLSAFE).decode("ascii")

    def decode(self, handle: str) -> Receipt | None:
        """The receipt a handle names, or None if it is malformed or forged."""
        try:
            raw = binascii.a2b_base64(handle.encode("ascii").translate(_FROM_URLSAFE))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            return None
        if len(raw) != _LAYOUT.size + _MAC_BYTES:
            return None
        payload, mac = raw[: _LAYOUT.size], raw[_LAYOUT.size :]
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        return Receipt(*_LAYOUT.unpack(payload))

    def decode_all(self, handles: list[str]) -> list[tuple[int, int, int] | None]:
        """Each handle's (queue id, row id, token), or None where it is malformed or forged: a batch's
        handles in one call, without a Receipt or a call per handle (they cost more than the MAC)."""
        keyed, unpack, compare = self._keyed, _LAYOUT.unpack, hmac.compare_digest
        decoded: list[tuple[int, int, int] | None] = []
        for handle in handles:
            try:
                raw = binascii.a2b_base64(handle.encode("ascii").translate(_FROM_URLSAFE))
            except (binascii.Error, UnicodeEncodeError, ValueError):
                decoded.append(None)
                continue
            if len(raw) != _SIGNED_SIZE:
                decoded.append(None)
                continue
            payload = raw[:_PAYLOAD_SIZE]
            mac = keyed.copy()
            mac.update(payload)
            decoded.append(unpack(payload) if compare(raw[_PAYLOAD_SIZE:], mac.digest()) else None)
        return decoded
