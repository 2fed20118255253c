/**
 * Small helpers the integration tests share: wait for a condition (polling every 20 ms, failing
 * with what was awaited), block the process for a while, and GET a loopback HTTP path with an
 * optional bearer token.
 */
import * as http from 'node:http';

/** Resolves once cond() holds; rejects after ms with `timed out after <ms> ms waiting for <what>`. */
export async function until(cond: () => boolean, what: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Blocks this process for `ms` (no timer fires, no socket is read): a GC pause or a starved CPU, as a heartbeat sees it. */
export function stall(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy on purpose
  }
}

/** GET http://127.0.0.1:port/p, with `authorization: Bearer <token>` when given. */
export function httpGet(port: number, p: string, token?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: p, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      })
      .on('error', reject);
  });
}

/** Whether a process with this pid exists (signal 0 checks without sending anything; EPERM: it exists, not ours). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
