"""One protocol-neutral exception tree.

The engine and the handlers raise these with a message and nothing about HTTP;
`protocol/error_codes.py` is the one table that turns each class into wire codes.
"""

from __future__ import annotations


class SQSError(Exception):
    """An error answered to the client (a 4xx or 5xx with an SQS error code)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class QueueDoesNotExist(SQSError):
    def __init__(self, message: str = "The specified queue does not exist.") -> None:
        super().__init__(message)


class QueueDeletedRecently(SQSError):
    pass


class QueueNameExists(SQSError):
    pass


class PurgeQueueInProgress(SQSError):
    pass


class OverLimit(SQSError):
    pass


class ReceiptHandleIsInvalid(SQSError):
    pass


class MessageNotInflight(SQSError):
    def __init__(self, message: str = "Message does not exist or is not available for visibility timeout change.") -> None:
        super().__init__(message)


class InvalidAttributeName(SQSError):
    pass


class InvalidAttributeValue(SQSError):
    pass


class InvalidMessageContents(SQSError):
    pass


class TooManyEntriesInBatchRequest(SQSError):
    pass


class EmptyBatchRequest(SQSError):
    pass


class BatchEntryIdsNotDistinct(SQSError):
    pass


class InvalidBatchEntryId(SQSError):
    pass


class BatchRequestTooLong(SQSError):
    pass


class UnsupportedOperation(SQSError):
    pass


class ResourceNotFound(SQSError):
    pass


class InvalidParameterValue(SQSError):
    pass


class MissingParameter(SQSError):
    pass


class InvalidAction(SQSError):
    pass


class MissingAction(SQSError):
    pass


class UnknownOperation(SQSError):
    """A request to a queue URL that names no action at all (AWS answers 404)."""


class SerializationError(SQSError):
    """The request body could not be decoded at all."""


class AccessDenied(SQSError):
    pass


class RequestTooLarge(SQSError):
    """The request body is over the server's limit; it is not read further."""


class MissingAuthenticationToken(SQSError):
    """Credentials are on and the request carries no signature at all."""

    def __init__(self, message: str = "Request is missing Authentication Token") -> None:
        super().__init__(message)


class IncompleteSignature(SQSError):
    """The signature's parts are missing or malformed."""


class InvalidClientTokenId(SQSError):
    """The access key (or a session token, which this server never issues) is unknown."""

    def __init__(self, message: str = "The security token included in the request is invalid.") -> None:
        super().__init__(message)


class SignatureDoesNotMatch(SQSError):
    """The signature is not the one the secret gives, or its time is outside the window."""

    def __init__(self, message: str = (
            "The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details.")) -> None:
        super().__init__(message)


class RequestExpired(SQSError):
    """A presigned URL used after its X-Amz-Expires."""

    def __init__(self, message: str = "Request has expired.") -> None:
        super().__init__(message)


class ServiceUnavailable(SQSError):
    pass


class InternalError(SQSError):
    def __init__(self, message: str = "We encountered an internal error. Please try again.") -> None:
        super().__init__(message)


def invalid_value(name: str, value: object, reason: str) -> InvalidParameterValue:
    """SQS's usual range-error wording."""
    return InvalidParameterValue(f"Value {value} for parameter {name} is invalid. Reason: {reason}")
