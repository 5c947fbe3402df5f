"""Receipt handles: a batch's handles decoded in one call agree with decoding each one."""

from __future__ import annotations

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
