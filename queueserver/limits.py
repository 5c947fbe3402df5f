"""SQS's documented limits and defaults, in one place (a leaf: the server and the client libraries read it)."""

MAX_BATCH_ENTRIES = 10
MAX_BATCH_ENTRY_ID_LENGTH = 80
MAX_QUEUE_NAME_LENGTH = 80
MAX_RECEIVE_MESSAGES = 10
MAX_WAIT_TIME_SECONDS = 20
MAX_VISIBILITY_TIMEOUT_SECONDS = 43_200  # 12 h, also the total since the receive
MAX_DELAY_SECONDS = 900
MIN_RETENTION_SECONDS = 60
MAX_RETENTION_SECONDS = 1_209_600  # 14 days
MIN_MESSAGE_SIZE_LIMIT = 1_024
MAX_MESSAGE_SIZE = 1_048_576  # 1 MiB, also a batch's total
MAX_MESSAGE_ATTRIBUTES = 10
MAX_ATTRIBUTE_NAME_LENGTH = 256
MAX_ATTRIBUTE_TYPE_LENGTH = 256
MAX_TAG_KEY_LENGTH = 128
MAX_TAG_VALUE_LENGTH = 256
MAX_TAGS = 50
MAX_POLICY_ACTIONS = 7
MAX_POLICY_BYTES = 8_192  # SQS's policy quota; also caps RedrivePolicy and RedriveAllowPolicy
MAX_ATTRIBUTE_VALUE_LENGTH = 2_048  # stated here (KMS's KeyId maximum), for the other free-text attributes
MAX_LIST_RESULTS = 1_000
# What one answer's messages may carry (bodies and attribute values): a receive or browse that would carry
# more answers fewer messages, never part of one, and its first message whole whatever its size. This
# bounds the memory an answer its client does not read holds (SQS too may answer fewer than asked).
MAX_ANSWER_BYTES = 8 * 1_048_576
COOLDOWN_MS = 60_000  # QueueDeletedRecently and PurgeQueueInProgress

DEFAULT_VISIBILITY_TIMEOUT = 30
DEFAULT_RETENTION_SECONDS = 345_600  # 4 days
IN_FLIGHT_LIMIT = 120_000  # in-flight messages per queue (a standard queue then refuses; FIFO stops delivering)
DEFAULT_REGION = "us-east-1"
# AWS's region names (us-east-1, us-gov-west-1, eusc-de-east-1): a DNS label of lower-case letters, digits and
# dashes, as a region goes into endpoint host names; here also into ARNs and queue URLs. A regex, for fullmatch.
REGION_NAME = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DEFAULT_ACCOUNT = "000000000000"
