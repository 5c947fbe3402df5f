"""The names and limits of queueserver's extensions to the SQS API.

The server answers them and the client libraries (admin CLI, spark, testing, console) call
them; both read the names from here, a leaf every layer may import.
"""

BROWSE_ACTION = "QueueserverBrowseMessages"
MAX_BROWSE = 1000  # the most messages one browse page returns
CREATE_SUBSCRIPTION_ACTION = "QueueserverCreateSubscription"
DELETE_SUBSCRIPTION_ACTION = "QueueserverDeleteSubscription"
LIST_SUBSCRIPTIONS_ACTION = "QueueserverListSubscriptions"
MAX_SUBSCRIPTIONS = 100  # per queue, by default (--max-subscriptions)

# The admin request that promotes a standby to primary (queueserver/standby.py, `queueserver promote`).
PROMOTE_PATH = "/_queueserver/promote"
# A queue tagged with this key and the value `true` stores a SendMessageBatch whole or not at all: one
# invalid entry fails every entry (each in Failed with its own reason). A tag, so every SDK can set it.
ATOMIC_BATCHES_TAG = "queueserver:atomic-batches"
NOT_STORED_CODE = "BatchEntryNotStored"  # the Failed code of a valid entry of such a batch
