"""AWS Signature Version 4, checked as AWS checks it, in the header and the presigned form.

The canonical request, string to sign and signing key are AWS's (and botocore's). What the
signature covers is what the request may use: `host` must be signed (AWS's rule: it goes into
queue URLs), and so must `x-amz-target` and `content-type` whenever they are sent, because they
choose the wire protocol, the action and whether the body is read (protocol/codecs.py); the query
string is decoded for the canonical request exactly as the Query protocol decodes it (`+` is a
space). The payload hash is the body's SHA-256, so a changed body fails; a declared
`x-amz-content-sha256` must be that hash, or `UNSIGNED-PAYLOAD` in the header form over TLS
(where the transport protects the body), and a presigned URL may be signed with
`UNSIGNED-PAYLOAD` (as every presigner does) only for a request without a body: what a
presigned URL runs is in its signed query string. The request time must be within 5 minutes of
the server's clock; a presigned URL also needs X-Amz-Expires, at most 7 days, and works until
then. The credential scope's region must be a region name. Session tokens are not issued here,
so a request carrying one is answered InvalidClientTokenId.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote_plus

from queueserver import errors
from queueserver.auth.credentials import AccessKey, CredentialStore
from queueserver.limits import REGION_NAME
from queueserver.client_text import whole_number

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
SERVICES = frozenset({SERVICE, "sns"})  # the SNS API (topics) shares the endpoint; its requests are signed for sns
SKEW_MS = 5 * 60 * 1000
MAX_PRESIGNED_SECONDS = 7 * 24 * 3600
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")  # used with fullmatch: `$` would let "\n" through
# What botocore and the other SDKs send; anything else takes the general parser (and its errors).
_AUTHORIZATION = re.compile(r"AWS4-HMAC-SHA256 Credential=([^,\s]+), ?SignedHeaders=([^,\s]+), ?Signature=([^,\s]+)")
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")  # nothing to encode (fullmatch)
_REGION = re.compile(REGION_NAME)  # fullmatch
# Headers that decide what a request runs, so a signature must cover them when they are sent.
_SIGNED_WHEN_SENT = ("x-amz-target", "content-type")
_KEPT = 1024  # entries of each cache below; a full cache starts again empty


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~1 µs more, and this is built per request
class Signed:
    """The request's parts that the signature covers."""

    method: str
    path: str
    query_string: str  # raw, still percent-encoded
    headers: dict[str, str]  # lower-case names
    body: bytes
    secure: bool  # came over TLS


@dataclass(frozen=True, slots=True)
class Verified:
    key: AccessKey
    region: str


def _amz_time(text: str) -> int:
    """Epoch ms of a checked YYYYMMDDTHHMMSSZ (by hand: strptime costs ~15 µs a request)."""
    try:
        moment = datetime(int(text[0:4]), int(text[4:6]), int(text[6:8]), int(text[9:11]), int(text[11:13]),
                          int(text[13:15]), tzinfo=timezone.utc)  # refuses month 13, day 32, hour 24...
        return int(moment.timestamp()) * 1000
    except (ValueError, OverflowError):
        raise errors.IncompleteSignature(f"X-Amz-Date must be in the ISO8601 Long Format: {text}") from None


def _header_value(value: str) -> str:
    """Trimmed, inner runs of spaces made one (only asked of values whose canonical line shows a need)."""
    if "  " in value or value[:1] == " " or value[-1:] == " " or "\t" in value:
        return " ".join(value.split())
    return value


def _canonical_path(path: str) -> str:
    """The canonical URI: the path URI-encoded as sent (which botocore encodes once more)."""
    if _PLAIN_PATH.fullmatch(path):
        return path
    return quote(quote(path, safe="/~"), safe="/~")


def _format_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _query_pairs(query_string: str) -> list[tuple[str, str]]:
    pairs = []
    for part in query_string.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((unquote_plus(name), unquote_plus(value)))  # as the Query protocol reads them
    return pairs


def _canonical_query(pairs: list[tuple[str, str]]) -> str:
    encoded = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def invalid_region(region: str) -> errors.SignatureDoesNotMatch:
    """AWS's answer to a credential scope whose region is no region (it would end up in ARNs and URLs)."""
    shown = region if len(region) <= 64 else region[:64] + "..."
    return errors.SignatureDoesNotMatch(f"Credential should be scoped to a valid region, not '{shown}'.")


def _unsigned_header(names: list[str], headers: dict[str, str]) -> errors.IncompleteSignature:
    """The error for a request whose signature leaves out `host`, or a sent header of _SIGNED_WHEN_SENT."""
    if "host" not in names:
        return errors.IncompleteSignature("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
    unsigned = next(name for name in _SIGNED_WHEN_SENT if name in headers and name not in names)
    return errors.IncompleteSignature(f"'{unsigned.title()}' must be a 'SignedHeader' in the AWS Authorization.")


@dataclass(frozen=True, slots=True)
class _Scope:
    """A credential scope already checked against the keys: its outcome and its signing key, ready to use."""

    verified: Verified
    day: str
    text: str  # "day/region/sqs/aws4_request", as the string to sign has it
    mac: hmac.HMAC  # keyed with the derived signing key; each request signs with a copy


class SigV4Verifier:
    """Verifies signatures against a CredentialStore; keeps each credential scope's derived signing key
    (one per key, day and region, as every SDK caches it) until the keys are reloaded."""

    def __init__(self, store: CredentialStore) -> None:
        self._store = store
        self._keys = store.keys  # the keys the scopes below were checked against
        self._scopes: dict[str, _Scope] = {}  # by credential ("AKID/day/region/sqs/aws4_request")
        self._times: dict[str, int] = {}  # X-Amz-Date -> epoch ms: many requests share a second

    def verify(self, request: Signed, now_ms: int) -> Verified:
        authorization = request.headers.get("authorization")
        if authorization is not None:
            return self._verify_header(request, authorization, now_ms)
        if "X-Amz-Signature=" in request.query_string or "X-Amz-Algorithm=" in request.query_string:
            return self._verify_presigned(request, now_ms)
        raise errors.MissingAuthenticationToken()

    def _verify_header(self, request: Signed, authorization: str, now_ms: int) -> Verified:
        headers = request.headers
        amz_date = headers.get("x-amz-date")
        parsed = _AUTHORIZATION.fullmatch(authorization)
        if parsed is not None and amz_date is not None:  # the form every SDK sends, read in one step
            credential, signed_headers, signature = parsed.groups()
        else:
            credential, signed_headers, signature, amz_date = self._parse_authorization(request, authorization)
        if "x-amz-security-token" in headers:
            raise errors.InvalidClientTokenId()
        return self._check(request, credential, amz_date, signed_headers, signature,
                           _canonical_query(_query_pairs(request.query_string)) if request.query_string else "",
                           now_ms, expires_s=None)

    @staticmethod
    def _parse_authorization(request: Signed, authorization: str) -> tuple[str, str, str, str]:
        """Credential, SignedHeaders, Signature and the request time of any Authorization header, or why not."""
        algorithm, _, rest = authorization.strip().partition(" ")
        fields = {}
        for part in rest.split(","):
            name, eq, value = part.strip().partition("=")
            if eq:
                fields[name] = value
        amz_date = request.headers.get("x-amz-date")
        if amz_date is None and "date" in request.headers:
            try:
                amz_date = _format_time(int(parsedate_to_datetime(request.headers["date"]).timestamp() * 1000))
            except (TypeError, ValueError):
                amz_date = None
        missing = [f"Authorization header requires '{name}' parameter."
                   for name in ("Credential", "Signature", "SignedHeaders") if not fields.get(name)]
        if amz_date is None:
            missing.append("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
        if algorithm != ALGORITHM:
            raise errors.IncompleteSignature(f"Unsupported AWS 'algorithm': '{algorithm}'. Authorization={authorization}")
        if missing:
            raise errors.IncompleteSignature(f"{' '.join(missing)} Authorization={authorization}")
        assert amz_date is not None
        return fields["Credential"], fields["SignedHeaders"], fields["Signature"], amz_date

    def _verify_presigned(self, request: Signed, now_ms: int) -> Verified:
        pairs = _query_pairs(request.query_string)
        fields = dict(pairs)
        missing = [name for name in ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-SignedHeaders",
                                     "X-Amz-Date", "X-Amz-Expires") if not fields.get(name)]
        if missing:
            raise errors.IncompleteSignature(
                " ".join(f"AWS query-string parameters must include '{name}'." for name in missing)
                + " Re-examine the query-string parameters.")
        if fields["X-Amz-Algorithm"] != ALGORITHM:
            raise errors.IncompleteSignature(f"Unsupported AWS 'algorithm': '{fields['X-Amz-Algorithm']}'.")
        if "X-Amz-Security-Token" in fields:
            raise errors.InvalidClientTokenId()
        expires = whole_number(fields["X-Amz-Expires"], MAX_PRESIGNED_SECONDS)
        if not expires:
            raise errors.IncompleteSignature(
                f"X-Amz-Expires must be a number of seconds from 1 to {MAX_PRESIGNED_SECONDS}.")
        canonical_query = _canonical_query([(k, v) for k, v in pairs if k != "X-Amz-Signature"])
        return self._check(request, fields["X-Amz-Credential"], fields["X-Amz-Date"], fields["X-Amz-SignedHeaders"],
                           fields["X-Amz-Signature"], canonical_query, now_ms, expires_s=expires)

    @staticmethod
    def _payload_hashes(request: Signed, presigned: bool) -> tuple[str, ...]:
        """The payload hashes the signature may cover (the first is tried first)."""
        actual = hashlib.sha256(request.body).hexdigest()
        declared = request.headers.get("x-amz-content-sha256")
        if declared is None or declared == actual:
            return (actual, UNSIGNED_PAYLOAD) if presigned and not request.body else (actual,)
        if declared == UNSIGNED_PAYLOAD and request.secure and not (presigned and request.body):
            return (UNSIGNED_PAYLOAD,)
        raise errors.SignatureDoesNotMatch(
            "The provided 'x-amz-content-sha256' header does not match what was computed."
            + (" A presigned request with a body must sign the body's hash." if presigned and request.body else ""))

    def _check(self, request: Signed, credential: str, amz_date: str, signed_headers: str, signature: str,
               canonical_query: str, now_ms: int, expires_s: int | None) -> Verified:
        if self._store.keys is not self._keys:  # reloaded: forget what the old keys proved
            self._scopes.clear()
            self._keys = self._store.keys
        scope = self._scopes.get(credential)
        if scope is None:
            parts = credential.split("/")
            if len(parts) != 5 or parts[4] != "aws4_request" or not parts[0]:
                raise errors.IncompleteSignature(
                    f"Credential should be scoped to a valid region, not '{parts[2] if len(parts) > 2 else ''}'. "
                    f"Credential={credential}" if len(parts) == 5 else
                    f"Credential should be a key id, date, region, service and aws4_request. Credential={credential}")
        headers = request.headers
        names = signed_headers.split(";")
        # host, and _SIGNED_WHEN_SENT spelled out (a loop would cost every request more)
        if ("host" not in names or ("x-amz-target" in headers and "x-amz-target" not in names)
                or ("content-type" in headers and "content-type" not in names)):
            raise _unsigned_header(names, headers)
        signed_at = self._times.get(amz_date)
        if signed_at is None and not _AMZ_DATE.fullmatch(amz_date):
            raise errors.IncompleteSignature(f"X-Amz-Date must be in the ISO8601 Long Format: {amz_date}")
        if scope is None:
            scope = self._new_scope(credential, parts)
        if scope.day != amz_date[:8]:
            raise errors.SignatureDoesNotMatch(
                f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
                f"'{scope.day}' != '{amz_date[:8]}', from '{amz_date}'.")
        if signed_at is None:
            signed_at = _amz_time(amz_date)
            if len(self._times) >= _KEPT:
                self._times.clear()
            self._times[amz_date] = signed_at
        if signed_at > now_ms + SKEW_MS:
            raise errors.SignatureDoesNotMatch(
                f"Signature not yet current: {amz_date} is still later than {_format_time(now_ms + SKEW_MS)} "
                f"({_format_time(now_ms)} + 5 min.)")
        if expires_s is None and signed_at < now_ms - SKEW_MS:
            raise errors.SignatureDoesNotMatch(
                f"Signature expired: {amz_date} is now earlier than {_format_time(now_ms - SKEW_MS)} "
                f"({_format_time(now_ms)} - 5 min.)")
        if expires_s is not None and now_ms > signed_at + expires_s * 1000:
            raise errors.RequestExpired()
        canonical_headers = "".join([f"{name}:{headers.get(name, '')}\n" for name in names])
        if ("  " in canonical_headers or "\t" in canonical_headers or ": " in canonical_headers
                or " \n" in canonical_headers):  # a value to trim: rare, so one look at all of them
            canonical_headers = "".join([f"{name}:{_header_value(headers.get(name, ''))}\n" for name in names])
        path = request.path
        head = "\n".join((request.method, "/" if path == "/" or not path else _canonical_path(path), canonical_query,
                          canonical_headers, signed_headers))
        for payload_hash in self._payload_hashes(request, expires_s is not None):
            canonical = hashlib.sha256(f"{head}\n{payload_hash}".encode("utf-8")).hexdigest()
            # A copy of the signing key's HMAC, not hmac.digest: that one hands the GIL away on every call.
            mac = scope.mac.copy()
            mac.update(f"{ALGORITHM}\n{amz_date}\n{scope.text}\n{canonical}".encode("utf-8"))
            if hmac.compare_digest(mac.hexdigest(), signature):
                return scope.verified
        raise errors.SignatureDoesNotMatch()

    def _new_scope(self, credential: str, parts: list[str]) -> _Scope:
        """Check a credential scope not seen since the keys were last loaded, and keep it."""
        key_id, day, region, service, _ = parts
        if not _REGION.fullmatch(region):
            raise invalid_region(region)
        key = self._keys.get(key_id)
        if key is None:
            raise errors.InvalidClientTokenId()
        if service not in SERVICES:
            raise errors.SignatureDoesNotMatch(f"Credential should be scoped to correct service: '{SERVICE}'. ")
        signing_key = ("AWS4" + key.secret).encode("utf-8")
        for part in (day, region, service, "aws4_request"):
            signing_key = hmac.new(signing_key, part.encode("utf-8"), hashlib.sha256).digest()
        scope = _Scope(Verified(key, region), day, "/".join(parts[1:]), hmac.new(signing_key, digestmod=hashlib.sha256))
        if len(self._scopes) >= _KEPT:
            self._scopes.clear()
        self._scopes[credential] = scope
        return scope
