"""Pure rules of the wire: the error table, MD5s, body characters, receipt handles, JSON bytes."""

from __future__ import annotations

import base64
import inspect
import json
import random
import uuid

import pytest

from queueserver import errors
from queueserver.models import uuid4_string
from queueserver.protocol import json_wire, messages
from queueserver.protocol.error_codes import ERROR_CODES, wire_error
from queueserver.storage.receipts import ReceiptSigner


def test_every_error_class_has_a_row_in_the_wire_table() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.SQSError) and c not in (errors.SQSError, errors.SNSError)]
    assert [c.__name__ for c in classes if c not in ERROR_CODES] == []


def test_an_unlisted_error_is_answered_as_an_internal_error() -> None:
    class Strange(errors.SQSError):
        pass

    assert wire_error(Strange("x")).status == 500


def test_the_queue_does_not_exist_row_carries_the_legacy_code() -> None:
    row = wire_error(errors.QueueDoesNotExist())
    assert (row.shape, row.query_code, row.status) == ("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", 400)


def test_over_limit_and_purge_in_progress_are_403() -> None:
    assert wire_error(errors.OverLimit("x")).status == 403
    assert wire_error(errors.PurgeQueueInProgress("x")).status == 403


def test_the_md5_of_message_attributes_matches_the_sdk_algorithm() -> None:
    # Reference values computed with the algorithm the Java SDK verifies (sorted names,
    # 4-byte lengths, transport byte 1 for String/Number and 2 for Binary).
    assert messages.md5_of_attributes({"x": {"DataType": "String", "StringValue": "y"}}) == "60bccc2493f2208427ba7907b3c95929"
    attributes = {
        "b": {"DataType": "Binary", "BinaryValue": base64.b64encode(b"\x00\x01").decode()},
        "a": {"DataType": "Number", "StringValue": "1.5"},
    }
    reordered = dict(reversed(list(attributes.items())))
    assert messages.md5_of_attributes(attributes) == messages.md5_of_attributes(reordered)


@pytest.mark.parametrize("body", ["\x00", "a\x08b", "\ufffe", "\ud800", "\uffff", "plain ascii\x1f", "\x0b\x0c"])
def test_characters_outside_xml_are_invalid_message_contents(body: str) -> None:
    with pytest.raises(errors.InvalidMessageContents):
        messages.check_body(body)


@pytest.mark.parametrize("body", ["\t\n\r", "emoji \U0001F600", "\ud7ff\ue000\ufffd", "\U0010ffff",
                                  "plain ascii ~!", "DEL \x7f", "tab\tin ascii", "\x80\xff latin-1"])
def test_every_allowed_character_is_accepted(body: str) -> None:
    assert messages.check_body(body) == len(body.encode("utf-8"))


def test_a_receipt_handle_round_trips_and_cannot_be_forged() -> None:
    signer = ReceiptSigner(b"k" * 32)
    handle = signer.encode(3, 42, -7)
    receipt = signer.decode(handle)
    assert receipt is not None and (receipt.queue_id, receipt.row_id, receipt.token) == (3, 42, -7)
    raw = bytearray(base64.urlsafe_b64decode(handle))
    raw[10] ^= 1
    assert signer.decode(base64.urlsafe_b64encode(bytes(raw)).decode()) is None
    assert ReceiptSigner(b"other" * 8).decode(handle) is None
    assert signer.decode("not a handle") is None
    assert signer.decode("") is None


def test_message_and_request_ids_are_version_4_uuids_in_their_text_form():
    rng = random.Random(7)
    ids = [uuid4_string(rng) for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


@pytest.mark.parametrize("text", ["plain", "é ü 日本 \U0001F600", 'quote " backslash \\ slash /',
                                  "controls \x00 \x01 \x1f \t \n \r \x7f", "separators \u2028 \u2029", ""])
def test_a_json_answer_is_byte_for_byte_what_the_stdlib_encoder_writes(text: str) -> None:
    result = {"Messages": [{"Body": text, "Attributes": {"SentTimestamp": "1"}, "Count": 2**63 - 1,
                            "Flags": [True, False, None], "Empty": {}}]}
    stdlib = json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert json_wire.encode(result) == stdlib


def test_what_the_fast_encoder_refuses_is_written_by_the_stdlib_one() -> None:
    result = {"message": "lone \ud800 surrogate", "big": 2**70}
    assert json_wire.encode(result) == '{"message":"lone \ud800 surrogate","big":1180591620717411303424}'.encode(
        "utf-8", "surrogatepass")
