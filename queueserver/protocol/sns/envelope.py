"""The notification SNS writes into a subscribed queue: its JSON envelope, signed as AWS signs it.

cryptography is imported when a key is first made or used, so that a server that never signs an
envelope does not hold that library (its objects would lengthen every full garbage collection).

The envelope's keys come in AWS's order. A standard topic's envelope is signed (SignatureVersion 1:
RSA with SHA-1, 2: with SHA-256) over AWS's canonical string (Message, MessageId, Subject if given,
Timestamp, TopicArn, Type: each `Key\\nValue\\n`) with the database's own key, whose self-signed
certificate this server serves at SigningCertURL, so a consumer that validates signatures can check
them against it. A FIFO topic's envelope carries no signature (as AWS's does not), and SequenceNumber.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

CERTIFICATE_PREFIX = "/SimpleNotificationService-"
_CERTIFICATE_DAYS = 3650


@dataclass(frozen=True)
class Signer:
    """The database's envelope key and the certificate served for it."""

    key: "rsa.RSAPrivateKey"
    cert_pem: str

    @property
    def cert_path(self) -> str:
        return f"{CERTIFICATE_PREFIX}{hashlib.sha1(self.cert_pem.encode()).hexdigest()}.pem"

    def sign(self, text: str, version: str) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        digest = hashes.SHA256() if version == "2" else hashes.SHA1()  # noqa: S303 (AWS's SignatureVersion 1)
        return base64.b64encode(self.key.sign(text.encode("utf-8"), padding.PKCS1v15(), digest)).decode("ascii")

    @classmethod
    def from_pem(cls, key_pem: str, cert_pem: str) -> "Signer":
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = serialization.load_pem_private_key(key_pem.encode("ascii"), password=None)
        assert isinstance(key, rsa.RSAPrivateKey)
        return cls(key, cert_pem)


def make_signing_material(now: datetime.datetime) -> tuple[str, str]:
    """A new RSA key and a self-signed certificate for it, both PEM (made once per database)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.queueserver.local")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=_CERTIFICATE_DAYS)).sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode("ascii")
    return key_pem, cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def timestamp(now_ms: int) -> str:
    """ISO 8601 in UTC with milliseconds and a Z, as AWS writes Timestamp."""
    moment = datetime.datetime.fromtimestamp(now_ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now_ms % 1000:03d}Z"


def string_to_sign(fields: dict[str, str]) -> str:
    """AWS's canonical string of a Notification: each present key of the list, `Key\\nValue\\n`."""
    return "".join(f"{key}\n{fields[key]}\n" for key in ("Message", "MessageId", "Subject", "Timestamp",
                                                          "TopicArn", "Type") if key in fields)


@dataclass(slots=True)
class Notification:
    """What every subscription's envelope of one publication shares (all but UnsubscribeURL)."""

    message_id: str
    topic_arn: str
    subject: str | None
    message: str
    timestamp: str
    signature_version: str | None  # None: a FIFO topic, unsigned
    signature: str | None
    cert_url: str | None
    attributes: dict[str, dict[str, str]] | None  # name -> {"Type", "Value"}

    signer: Signer | None = None  # signs on first need when `signature` is None (a standard topic)
    base_url: str = ""

    def sign(self) -> None:
        """Sign now (once): an RSA signature costs a millisecond, so only a delivery with an envelope asks."""
        if self.signature is None and self.signer is not None and self.signature_version is not None:
            fields = {"Message": self.message, "MessageId": self.message_id, "Timestamp": self.timestamp,
                      "TopicArn": self.topic_arn, "Type": "Notification"}
            if self.subject is not None:
                fields["Subject"] = self.subject
            self.signature = self.signer.sign(string_to_sign(fields), self.signature_version)
            self.cert_url = self.base_url + self.signer.cert_path

    def body(self, unsubscribe_url: str, sequence_number: str | None) -> str:
        self.sign()
        envelope: dict[str, Any] = {"Type": "Notification", "MessageId": self.message_id}
        if sequence_number is not None:
            envelope["SequenceNumber"] = sequence_number
        envelope["TopicArn"] = self.topic_arn
        if self.subject is not None:
            envelope["Subject"] = self.subject
        envelope["Message"] = self.message
        envelope["Timestamp"] = self.timestamp
        if self.signature_version is not None:
            envelope["SignatureVersion"] = self.signature_version
            envelope["Signature"] = self.signature
            envelope["SigningCertURL"] = self.cert_url
        envelope["UnsubscribeURL"] = unsubscribe_url
        lines = [f'  "{key}" : {orjson.dumps(value).decode("utf-8")}' for key, value in envelope.items()]
        if self.attributes:  # one line per attribute, as AWS lays it out
            inner = ",\n".join(f'    {orjson.dumps(name).decode("utf-8")} : {orjson.dumps(value).decode("utf-8")}'
                                for name, value in self.attributes.items())
            lines.append(f'  "MessageAttributes" : {{\n{inner}\n  }}')
        return "{\n" + ",\n".join(lines) + "\n}"


def notification(signer: Signer | None, base_url: str, *, message_id: str, topic_arn: str, subject: str | None,
                 message: str, now_ms: int, signature_version: str | None,
                 attributes: dict[str, dict[str, str]] | None) -> Notification:
    """The shared part of a publication's envelopes, to be signed (`sign`) when `signer` is given."""
    return Notification(message_id, topic_arn, subject, message, timestamp(now_ms), signature_version, None, None,
                        attributes, signer, base_url)


def unsubscribe_url(base_url: str, subscription_arn: str) -> str:
    return f"{base_url}/?Action=Unsubscribe&SubscriptionArn={quote(subscription_arn, safe=':')}"
