"""The one exception tree of queueserver.

Everything the server raises on purpose derives from `QueueserverError`; the wire errors
derive from `SQSError`, which `protocol/error_codes.py` (the one table) turns into SQS codes.
The engine and the handlers raise these with a message and nothing about HTTP.

    QueueserverError
     ├── SQSError .................... answered to the client as an SQS error (4xx/5xx)
     │    ├── QueueDoesNotExist, QueueDeletedRecently, QueueNameExists, PurgeQueueInProgress
     │    ├── OverLimit, ReceiptHandleIsInvalid, MessageNotInflight
     │    ├── InvalidAttributeName, InvalidAttributeValue, InvalidMessageContents
     │    ├── TooManyEntriesInBatchRequest, EmptyBatchRequest, BatchEntryIdsNotDistinct,
     │    │   InvalidBatchEntryId, BatchRequestTooLong
     │    ├── UnsupportedOperation, ResourceNotFound, InvalidParameterValue, MissingParameter
     │    ├── InvalidAction, MissingAction, UnknownOperation, SerializationError, RequestTooLarge
     │    ├── AccessDenied, MissingAuthenticationToken, IncompleteSignature, InvalidClientTokenId,
     │    │   SignatureDoesNotMatch, RequestExpired
     │    ├── ServiceUnavailable, InternalError
     │    └── SNSError ............... the SNS API's errors, answered in SNS's XML shape
     │         ├── TopicNotFound, InvalidParameter, ParameterValueInvalid, AuthorizationError,
     │         │   TaggedResourceNotFound, SNSValidationError
     │         └── TopicBatchTooManyEntries, TopicBatchEmpty, TopicBatchIdsNotDistinct,
     │             TopicBatchEntryIdInvalid, TopicBatchTooLong
     ├── StartupError ................ the database cannot be served (the server does not start)
     │    └── SchemaTooNew
     ├── ConfigError (ValueError) .... a setting or a declared queue that cannot be used
     ├── CredentialsError (ValueError) the credentials file cannot be used
     ├── PolicyError (ValueError) .... a queue or identity policy that does not parse
     │    └── ConditionError
     ├── ConsoleError ................ an SQS error met by a console action, kept with its code
     ├── ConsoleRefused .............. a console form not run: no such action, or the viewer may not
     ├── ConsoleNotConfirmed ......... a console purge or delete whose confirmation does not name the queue
     └── ClientError ................. raised by the client libraries, on the caller's side of the wire
          (defined in their packages, which users import without the server:
          admin_cli.AdminError, testing.QueueServerError,
          spark.QueueWriteError, spark.BrowseNotSupported, spark.PySparkMissing)

Outside the tree: `consumer.threads.HandlerInterrupted` (an Exception). The consumer imports
nothing of queueserver but its clock, so that it runs unchanged against AWS SQS.

The ValueError bases stay so that code validating user input with `except ValueError` keeps working.
"""

from __future__ import annotations


class QueueserverError(Exception):
    """The root: `except QueueserverError` catches every error queueserver raises on purpose."""


class SQSError(QueueserverError):
    """An error answered to the client (a 4xx or 5xx with an SQS error code)."""

    default_message: str | None = None  # AWS's fixed text, for the errors that have one

    def __init__(self, message: str | None = None) -> None:
        if message is None:
            if self.default_message is None:
                raise TypeError(f"{type(self).__name__} needs a message")
            message = self.default_message
        super().__init__(message)
        self.message = message


class QueueDoesNotExist(SQSError):
    default_message = "The specified queue does not exist."


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
    default_message = "Message does not exist or is not available for visibility timeout change."


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

    default_message = "Request is missing Authentication Token"


class IncompleteSignature(SQSError):
    """The signature's parts are missing or malformed."""


class InvalidClientTokenId(SQSError):
    """The access key (or a session token, which this server never issues) is unknown."""

    default_message = "The security token included in the request is invalid."


class SignatureDoesNotMatch(SQSError):
    """The signature is not the one the secret gives, or its time is outside the window."""

    default_message = (
        "The request signature we calculated does not match the signature you provided. Check your AWS "
        "Secret Access Key and signing method. Consult the service documentation for details.")


class RequestExpired(SQSError):
    """A presigned URL used after its X-Amz-Expires."""

    default_message = "Request has expired."


class ServiceUnavailable(SQSError):
    pass


class InternalError(SQSError):
    default_message = "We encountered an internal error. Please try again."


class SNSError(SQSError):
    """An error of the SNS API (topics and their subscriptions), answered in SNS's XML error shape."""


class TopicNotFound(SNSError):
    """A topic or subscription that does not exist (SNS's NotFound)."""


class InvalidParameter(SNSError):
    pass


class ParameterValueInvalid(SNSError):
    """A message attribute that SNS refuses (its code is ParameterValueInvalid)."""


class AuthorizationError(SNSError):
    pass


class TaggedResourceNotFound(SNSError):
    """A tagging call on an ARN that names no topic (SNS's ResourceNotFound)."""


class SNSValidationError(SNSError):
    """A member the SNS model requires is missing (SNS's ValidationError)."""


class TopicBatchTooManyEntries(SNSError):
    default_message = "The batch request contains more entries than permissible."


class TopicBatchEmpty(SNSError):
    default_message = "The batch request doesn't contain any entries."


class TopicBatchIdsNotDistinct(SNSError):
    default_message = "Two or more batch entries in the request have the same Id."


class TopicBatchEntryIdInvalid(SNSError):
    pass


class TopicBatchTooLong(SNSError):
    default_message = "The length of all the messages put together is more than the limit."


class StartupError(QueueserverError):
    """The database cannot be served; the message says why and what to do."""


class SchemaTooNew(StartupError):
    """The database was migrated by a newer queueserver than this one."""


class ConfigError(QueueserverError, ValueError):
    """A setting or queue that cannot be used; the message names the key and the problem in one line."""


class CredentialsError(QueueserverError, ValueError):
    """The credentials file cannot be used; the message names the key and the field."""


class PolicyError(QueueserverError, ValueError):
    """A policy document that does not parse or uses what this server does not support."""


class ConditionError(PolicyError):
    """A policy's Condition block that does not parse."""


class ConsoleError(QueueserverError):
    """An SQS error raised by a console action, with the code a client would have seen."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ConsoleRefused(QueueserverError):
    """A console form that is not run: no such action (404), or the viewer may not (403)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class ConsoleNotConfirmed(QueueserverError):
    """A console purge or delete whose confirmation does not name the queue: nothing is done."""


class ClientError(QueueserverError):
    """The base of the client libraries' errors (admin CLI, testing, spark).

    Those classes live in their own packages because users import them without the server."""


def invalid_value(name: str, value: object, reason: str) -> InvalidParameterValue:
    """SQS's usual range-error wording."""
    return InvalidParameterValue(f"Value {value} for parameter {name} is invalid. Reason: {reason}")
