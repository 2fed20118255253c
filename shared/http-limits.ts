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
