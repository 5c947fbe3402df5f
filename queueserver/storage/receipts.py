"""Receipt handles: opaque, rotated on every receive, and unforgeable.

A handle names the queue, the message row and the receive's random token, signed
with a BLAKE2b MAC under a per-database secret, so a client can neither make one up nor
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
        # The MAC is BLAKE2b over the secret then the payload (BLAKE2 has no length extension, so a
        # secret prefix makes it a MAC): both fit one 128-byte block, one compression a handle, where
        # BLAKE2b's keyed mode pads the key to a block of its own and compresses twice.
        self._prefixed = hashlib.blake2b(secret, digest_size=_MAC_BYTES)
        # Handles signed in keyed mode are accepted too: a database may hold messages whose latest handle
        # was signed that way, and a standard queue's latest handle deletes however long ago it was received.
        self._keyed = hashlib.blake2b(key=secret, digest_size=_MAC_BYTES)

    def _valid(self, payload: bytes, mac: bytes) -> bool:
        prefixed = self._prefixed.copy()
        prefixed.update(payload)
        return hmac.compare_digest(mac, prefixed.digest()) or self._signed_keyed(payload, mac)

    def _signed_keyed(self, payload: bytes, mac: bytes) -> bool:
        keyed = self._keyed.copy()
        keyed.update(payload)
        return hmac.compare_digest(mac, keyed.digest())

    def encode(self, queue_id: int, row_id: int, token: int) -> str:
        payload = _LAYOUT.pack(queue_id, row_id, token)
        mac = self._prefixed.copy()  # inline: this runs for every message received
        mac.update(payload)
        return binascii.b2a_base64(payload + mac.digest(), newline=False).translate(_TO_URLSAFE).decode("ascii")

    def decode(self, handle: str) -> Receipt | None:
        """The receipt a handle names, or None if it is malformed or forged."""
        try:
            raw = binascii.a2b_base64(handle.encode("ascii").translate(_FROM_URLSAFE))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            return None
        if len(raw) != _SIGNED_SIZE:
            return None
        payload = raw[:_PAYLOAD_SIZE]
        if not self._valid(payload, raw[_PAYLOAD_SIZE:]):
            return None
        return Receipt(*_LAYOUT.unpack(payload))

    def decode_all(self, handles: list[str]) -> list[tuple[int, int, int] | None]:
        """Each handle's (queue id, row id, token), or None where it is malformed or forged: a batch's
        handles in one call, without a Receipt or a call per handle (they cost more than the MAC)."""
        prefixed, unpack, compare = self._prefixed, _LAYOUT.unpack, hmac.compare_digest
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
            mac = prefixed.copy()
            mac.update(payload)
            if compare(raw[_PAYLOAD_SIZE:], mac.digest()) or self._signed_keyed(payload, raw[_PAYLOAD_SIZE:]):
                decoded.append(unpack(payload))
            else:
                decoded.append(None)
        return decoded
