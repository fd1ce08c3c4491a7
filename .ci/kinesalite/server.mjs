// Starts kinesalite, the Kinesis Data Streams emulator the pipes tests run
// against, in memory, and prints "listening <port>" once it accepts
// connections. PORT=0 (the default) picks a free loopback port. Streams
// become ACTIVE at once. The process runs until it is killed or stdin
// closes.
import kinesalite from "kinesalite";

const port = Number(process.env.PORT ?? 0);
const server = kinesalite({ createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: 100 });
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
