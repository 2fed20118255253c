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
