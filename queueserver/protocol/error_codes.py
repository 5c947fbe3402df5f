"""The one table from error classes to SQS wire codes, for both protocols.

Each row: the JSON `__type` shape name, the legacy Query code (also sent as the
`x-amzn-query-error` header, which botocore turns into `Error.Code`), the HTTP status,
and whether the fault is the sender's or the server's.

SQS's JSON model has a shape for the SQS-specific errors only (`com.amazonaws.sqs#<shape>`);
the errors it inherited from the Query API (InvalidParameterValue, MissingParameter, ...)
come from AWS's common service layer as `com.amazon.coral.service#<Name>Exception`, with
the old code in the header: that is what AWS answers and what botocore expects.
"""

from __future__ import annotations

from dataclasses import dataclass

from queueserver import errors


SQS_NAMESPACE = "com.amazonaws.sqs"
COMMON_NAMESPACE = "com.amazon.coral.service"


@dataclass(frozen=True)
class WireError:
    shape: str
    query_code: str
    status: int
    sender_fault: bool = True
    modeled: bool = True  # a shape of SQS's model; otherwise one of AWS's common errors

    @property
    def fault(self) -> str:
        return "Sender" if self.sender_fault else "Receiver"

    @property
    def json_type(self) -> str:
        return f"{SQS_NAMESPACE if self.modeled else COMMON_NAMESPACE}#{self.shape}"


ERROR_CODES: dict[type[errors.SQSError], WireError] = {
    errors.QueueDoesNotExist: WireError("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", 400),
    errors.QueueDeletedRecently: WireError(
        "QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently", 400),
    errors.QueueNameExists: WireError("QueueNameExists", "QueueAlreadyExists", 400),
    errors.PurgeQueueInProgress: WireError(
        "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress", 403),
    errors.OverLimit: WireError("OverLimit", "OverLimit", 403),
    errors.ReceiptHandleIsInvalid: WireError("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 400),
    errors.MessageNotInflight: WireError("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", 400),
    errors.InvalidAttributeName: WireError("InvalidAttributeName", "InvalidAttributeName", 400),
    errors.InvalidAttributeValue: WireError("InvalidAttributeValue", "InvalidAttributeValue", 400),
    errors.InvalidMessageContents: WireError("InvalidMessageContents", "InvalidMessageContents", 400),
    errors.TooManyEntriesInBatchRequest: WireError(
        "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400),
    errors.EmptyBatchRequest: WireError("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", 400),
    errors.BatchEntryIdsNotDistinct: WireError(
        "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400),
    errors.InvalidBatchEntryId: WireError("InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", 400),
    errors.BatchRequestTooLong: WireError("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", 400),
    errors.UnsupportedOperation: WireError(
        "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", 400),
    errors.ResourceNotFound: WireError("ResourceNotFoundException", "ResourceNotFoundException", 404),
    errors.InvalidParameterValue: WireError(
        "InvalidParameterValueException", "InvalidParameterValue", 400, modeled=False),
    errors.MissingParameter: WireError(
        "MissingRequiredParameterException", "MissingParameter", 400, modeled=False),
    # A JSON request naming no known action is the common layer's UnknownOperationException.
    errors.InvalidAction: WireError("UnknownOperationException", "InvalidAction", 400, modeled=False),
    errors.MissingAction: WireError("UnknownOperationException", "MissingAction", 400, modeled=False),
    errors.UnknownOperation: WireError(
        "UnknownOperationException", "UnknownOperationException", 404, modeled=False),
    errors.SerializationError: WireError("SerializationException", "MalformedInput", 400, modeled=False),
    # Authentication and authorization: AWS's common shapes over JSON, the Query codes boto3 reports.
    errors.AccessDenied: WireError("AccessDeniedException", "AccessDenied", 403, modeled=False),
    errors.MissingAuthenticationToken: WireError(
        "MissingAuthenticationTokenException", "MissingAuthenticationToken", 403, modeled=False),
    errors.IncompleteSignature: WireError("IncompleteSignatureException", "IncompleteSignature", 400, modeled=False),
    errors.InvalidClientTokenId: WireError("UnrecognizedClientException", "InvalidClientTokenId", 403, modeled=False),
    errors.SignatureDoesNotMatch: WireError("InvalidSignatureException", "SignatureDoesNotMatch", 403, modeled=False),
    errors.RequestExpired: WireError("RequestExpired", "RequestExpired", 400, modeled=False),
    errors.RequestTooLarge: WireError("RequestEntityTooLarge", "RequestEntityTooLarge", 413, modeled=False),
    errors.ServiceUnavailable: WireError("ServiceUnavailable", "ServiceUnavailable", 503, sender_fault=False),
    errors.InternalError: WireError("InternalError", "InternalError", 500, sender_fault=False),
    # SNS (topics): the shape names of botocore's SNS model, whose Query codes these are.
    errors.TopicNotFound: WireError("NotFoundException", "NotFound", 404, modeled=False),
    errors.InvalidParameter: WireError("InvalidParameterException", "InvalidParameter", 400, modeled=False),
    errors.ParameterValueInvalid: WireError(
        "InvalidParameterValueException", "ParameterValueInvalid", 400, modeled=False),
    errors.AuthorizationError: WireError("AuthorizationErrorException", "AuthorizationError", 403, modeled=False),
    errors.TaggedResourceNotFound: WireError("ResourceNotFoundException", "ResourceNotFound", 404, modeled=False),
    errors.SNSValidationError: WireError("ValidationException", "ValidationError", 400, modeled=False),
    errors.TopicBatchTooManyEntries: WireError(
        "TooManyEntriesInBatchRequestException", "TooManyEntriesInBatchRequest", 400, modeled=False),
    errors.TopicBatchEmpty: WireError("EmptyBatchRequestException", "EmptyBatchRequest", 400, modeled=False),
    errors.TopicBatchIdsNotDistinct: WireError(
        "BatchEntryIdsNotDistinctException", "BatchEntryIdsNotDistinct", 400, modeled=False),
    errors.TopicBatchEntryIdInvalid: WireError(
        "InvalidBatchEntryIdException", "InvalidBatchEntryId", 400, modeled=False),
    errors.TopicBatchTooLong: WireError("BatchRequestTooLongException", "BatchRequestTooLong", 400, modeled=False),
}


def wire_error(error: errors.SQSError) -> WireError:
    for cls in type(error).__mro__:
        row = ERROR_CODES.get(cls)  # type: ignore[arg-type]
        if row is not None:
            return row
    return ERROR_CODES[errors.InternalError]
