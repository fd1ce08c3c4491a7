// Starts the SQS-compatible server the pipes tests run against and prints
// "listening <port>" once it accepts connections. PORT=0 (the default) picks a
// free loopback port. The process runs until it is killed or stdin closes.
import { createSqsServer } from "local-aws-sqs";

const port = Number(process.env.PORT ?? 0);
const server = await createSqsServer({
  port,
  hostname: "127.0.0.1",
  emulateQueueCreationLifecycle: false,
  validateDlqDestination: true,
});
const addr = server.address();
process.stdout.write(`listening ${addr.port}\n`);
if (process.env.SQS_STAY !== "1") {
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
}
