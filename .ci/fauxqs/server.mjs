// Starts fauxqs, the SQS/SNS/S3 emulator the pipes tests also run against,
// and prints "listening <port>" once it accepts connections. PORT=0 (the
// default) picks a free port. fauxqs needs Node >= 22.5: run this with the
// Node installed beside it (node_modules/.bin/node), not the machine's.
// The process runs until it is killed or stdin closes.
import { startFauxqs } from "fauxqs";

const port = Number(process.env.PORT ?? 0);
const server = await startFauxqs({ port, logger: false });
process.stdout.write(`listening ${server.port}\n`);
if (process.env.SQS_STAY !== "1") {
  process.stdin.resume();
  process.stdin.on("end", async () => {
    await server.stop();
    process.exit(0);
  });
}
