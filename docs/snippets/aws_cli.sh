export AWS_ACCESS_KEY_ID=any AWS_SECRET_ACCESS_KEY=any AWS_DEFAULT_REGION=us-east-1
aws --endpoint-url http://127.0.0.1:9324 sqs create-queue --queue-name cli-jobs
aws --endpoint-url http://127.0.0.1:9324 sqs send-message \
    --queue-url http://127.0.0.1:9324/000000000000/cli-jobs --message-body hello
aws --endpoint-url http://127.0.0.1:9324 sqs receive-message \
    --queue-url http://127.0.0.1:9324/000000000000/cli-jobs --query 'Messages[0].Body' --output text
