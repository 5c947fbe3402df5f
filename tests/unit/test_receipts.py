"""Receipt handles: a batch's handles decoded in one call agree with decoding each one."""

from __future__ import annotations

import base64
import hashlib
import struct

from queueserver.storage.receipts import ReceiptSigner


def test_a_batch_of_handles_decodes_as_each_handle_does_forged_and_malformed_ones_to_none() -> None:
    signer = ReceiptSigner(b"k" * 32)
    other = ReceiptSigner(b"o" * 32)
    good = signer.encode(3, 41, -7)
    flipped = good[:10] + ("A" if good[10] != "A" else "B") + good[11:]
    handles = [good, other.encode(3, 41, -7), flipped, good[:-4], "not base64 !", "é", "", signer.encode(4, 1, 2)]
    decoded = signer.decode_all(handles)
    assert decoded[0] == (3, 41, -7)
    assert decoded[7] == (4, 1, 2)
    assert decoded[1:7] == [None] * 6
    for handle, got in zip(handles, decoded):
        one = signer.decode(handle)
        assert got == (None if one is None else (one.queue_id, one.row_id, one.token))


def test_a_handle_signed_in_keyed_mode_is_still_accepted_and_a_changed_one_is_not() -> None:
    """Handles signed with BLAKE2b's keyed mode (the MAC of earlier releases) still delete their messages."""
    secret = b"s" * 32
    payload = struct.pack(">qqq", 5, 77, -3)
    keyed = base64.urlsafe_b64encode(payload + hashlib.blake2b(payload, key=secret, digest_size=16).digest()).decode()
    signer = ReceiptSigner(secret)
    assert signer.decode_all([keyed]) == [(5, 77, -3)]
    receipt = signer.decode(keyed)
    assert receipt is not None and (receipt.queue_id, receipt.row_id, receipt.token) == (5, 77, -3)
    assert signer.encode(5, 77, -3) != keyed  # new handles are signed with the prefix MAC
    forged = base64.urlsafe_b64encode(payload + bytes(16)).decode()
    assert signer.decode_all([forged]) == [None] and signer.decode(forged) is None
