"""The SNS API (topics with sqs subscriptions) on the SQS endpoint: AWS Query in, SNS XML out."""
