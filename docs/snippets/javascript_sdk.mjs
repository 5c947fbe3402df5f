import {
  CreateQueueCommand, DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand, SQSClient,
} from "@aws-sdk/client-sqs";

const sqs = new SQSClient({
  endpoint: "http://127.0.0.1:9324",
  region: "us-east-1",
  credentials: { accessKeyId: "any", secretAccessKey: "any" },
});
const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "js-jobs" }));
await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "hello from JavaScript" }));
const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 20 }));
for (const message of Messages) {
  console.log(message.Body);
  await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: message.ReceiptHandle }));
}
