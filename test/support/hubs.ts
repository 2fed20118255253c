/**
 * Real hubs on loopback for a test file, with the raw ws clients it opens: both go after each
 * test (the clients terminated, the hubs closed). Call at the top of a file.
 */
import type WebSocket from 'ws';
import { Hub, type HubOptions } from '../../orchestrator/hub';

export function useHubs(defaults: HubOptions): { hub: (options?: HubOptions) => Promise<Hub>; sockets: WebSocket[] } {
  const hubs: Hub[] = [];
  const sockets: WebSocket[] = [];
  afterEach(async () => {
    sockets.splice(0).forEach((w) => w.terminate());
    for (const h of hubs.splice(0)) await h.close();
  });
  const hub = async (options: HubOptions = {}): Promise<Hub> => {
    const h = await Hub.listen({ ...defaults, ...options });
    hubs.push(h);
    return h;
  };
  return { hub, sockets };
}
