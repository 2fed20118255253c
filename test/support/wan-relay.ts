/**
 * A WAN in user space, for kernels without `tc netem` (test/support/netns.ts): a TCP relay run
 * with `node -e` inside a namespace. It listens on 127.0.0.1 and forwards every connection to
 * the target; every chunk waits `delayMs` in each direction, and a share `holdShare` of chunks waits
 * `holdMs` more, as a TCP segment lost once waits for its retransmission (later chunks queue
 * behind it: order is kept). So 50 ms / 1% / 200 ms is a 100 ms round trip with 1% of segments
 * retransmitted, as seen by the application; what it cannot do is lose a packet below TCP.
 *
 * Argument: JSON {"port": listen port (0: any), "host": target host, "targetPort": n, "delayMs": n,
 * "holdShare": x, "holdMs": n, "seed": n}. Prints {"ready": true, "port": n} once listening.
 */
export const WAN_RELAY_JS = `
const net = require('node:net');
const o = JSON.parse(process.argv[1]);
let s = o.seed >>> 0 || 1;
const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
function pipe(from, to) {
  let last = 0;
  from.on('data', (chunk) => {
    const at = Math.max(last, Date.now() + o.delayMs + (rand() < o.holdShare ? o.holdMs : 0));
    last = at;
    setTimeout(() => { if (!to.destroyed) to.write(chunk); }, at - Date.now());
  });
  from.on('end', () => setTimeout(() => to.end(), Math.max(0, last - Date.now())));
  from.on('error', () => to.destroy());
  from.on('close', () => setTimeout(() => to.destroy(), Math.max(0, last - Date.now()) + 10));
}
const server = net.createServer((client) => {
  const up = net.connect(o.targetPort, o.host);
  pipe(client, up);
  pipe(up, client);
});
server.listen(o.port, '127.0.0.1', () => process.stdout.write(JSON.stringify({ ready: true, port: server.address().port }) + '\\n'));
process.on('SIGTERM', () => process.exit(0));
`;
