import type * as net from 'node:net';

/**
 * The time limits every kais HTTP server takes (the agent's ingress, the orchestrator's HTTP port,
 * the hub's WebSocket port, kais node's targets and admin), given to http(s).createServer. Node's
 * defaults (60 s for the headers, 300 s for a whole request, checked every 30 s) let one client hold
 * thousands of idle or trickling connections for a minute or more each: 20,000 idle sockets took an
 * agent to its file-descriptor limit, and 50 bodies trickled at 1 byte/s were still open after 100 s.
 * Every kais request is small (a device's request is a few dozen bytes, an admin body at most 64 KiB
 * or the node admin's cap), so a client that has not sent its headers in 10 s, or its whole request
 * in 30 s, is cut (408); connections are checked every second. Keep-alive between requests is not
 * affected (keepAliveTimeout governs it).
 */
export const HTTP_SERVER_LIMITS = {
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  connectionsCheckingInterval: 1_000,
} as const;

/**
 * How long a kais server keeps an idle keep-alive connection (ms): the agent's ingress and the
 * emulated nodes' targets (server.keepAliveTimeout; Node's default is 5 s).
 */
export const SERVER_KEEP_ALIVE_MS = 65_000;

/**
 * How long a kais client keeps an idle keep-alive connection before it closes it itself (ms): well
 * under SERVER_KEEP_ALIVE_MS, so a kais server never closes a connection a kais client still holds.
 *
 * Why: Node's http.Agent without `timeout` keeps a free socket until the server closes it, and it
 * learns of that close only when its event loop reads the FIN. A client busy sending (a burst of
 * requests in one tick) takes a socket the server has just closed, writes into it and gets a reset.
 * That is the likely end of 26 of the 312,157 requests of a 600 s `kais up` (seed 31, session 54):
 * "no answer: read ECONNRESET", every process alive. On the agent's side such a reset marks a
 * healthy node unreachable. With `timeout`, the client closes its idle sockets first, on its own
 * timer (and Node lowers it to a server's `Keep-Alive: timeout=N` hint less 1 s; without `timeout`
 * Node 20 ignores the hint). test/integration/keep-alive.integration.test.ts plays the race against
 * a real server process, with and without it (the client busy until the server has closed).
 */
export const CLIENT_IDLE_MS = 30_000;

/** The options of a kais client's keep-alive http(s).Agent: at most `maxSockets` per target, idle ones closed after `idleMs`. */
export function keepAliveAgentOptions(
  maxSockets: number,
  idleMs = CLIENT_IDLE_MS,
): { keepAlive: true; maxSockets: number; timeout: number } {
  return { keepAlive: true, maxSockets, timeout: idleMs };
}

/**
 * Connections a server holds at once (Node's server.maxConnections: one more is closed at once).
 * All of a process's sockets share one file-descriptor budget, so a flood on one port must not take
 * the descriptors its other links need (an agent's to its nodes and the orchestrator): 20,000 idle
 * sockets on an agent's ingress left it none. Generous for honest use: a device's request holds
 * its connection for at most its deadline, an eAP's agent holds one socket to the hub.
 */
export const MAX_CONNECTIONS = {
  /** the agent's ingress (devices) and a kais node target (agents' proxies) */
  ingress: 4096,
  /** the hub's WebSocket port (one socket per eAP, plus those waiting for their hello, at most 1,024) */
  hub: 4096,
  /** the orchestrator's HTTP port and kais node's admin (operators, Prometheus, the dashboard) */
  admin: 1024,
} as const;

/**
 * Connections one remote address holds at once on a port, under MAX_CONNECTIONS: one client (one
 * address) flooding a port could otherwise fill its whole cap, and every honest client then waited
 * for headersTimeout to free a slot. The hub's is above the most agents one host can run (a scenario
 * has at most 1,000 eAPs, shared/scenario.ts SCENARIO_LIMITS) plus the 64 sockets one address may
 * have waiting for their hello; the admin port's is far above what an operator's tools hold. Not
 * on the ingress and the node targets: behind a NAT, or an agent's proxy, many honest requests
 * share one address.
 */
export const MAX_CONNECTIONS_PER_ADDRESS = {
  hub: 1200,
  admin: 256,
} as const;

/**
 * Closes, as soon as it is accepted, a connection from an address that already holds `max` on
 * `server` (its 'connection' event: the raw TCP socket, before TLS or HTTP). Hand-written: no
 * npm library does this for a plain Node server, and it is a counter per address.
 */
export function capConnectionsPerAddress(server: net.Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: net.Socket) => {
    const address = socket.remoteAddress ?? '';
    const n = open.get(address) ?? 0;
    if (n >= max) {
      socket.destroy();
      return;
    }
    open.set(address, n + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}
