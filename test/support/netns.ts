/**
 * Hosts with their own addresses, on this machine (issue 19 item 3): Linux network namespaces
 * joined by veth pairs, with WAN latency and loss on a link (`tc netem`) when the kernel has it,
 * and helpers to cut and restore one link. Needs root (as CI runs); `NetnsLab.unavailable()`
 * says why not, so that a test can skip with that message.
 *
 * Addresses: link k of lab l gets 10.213.(8 l + k mod 8).(4 floor(k / 8))/30 (side a +1, side b +2;
 * links 0-7: 10.213.(8 l + k).0/30, up to 512 links a lab); the "root" host is this process's
 * own namespace (where the test itself runs). Only these namespaces' addresses are used. Every
 * namespace is named `kais<pid>-<host>` and deleted by `destroy()` (its veths go with it).
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { alive } from './wait';

export interface LinkShape {
  /** One-way delay added on each side, ms (so the round trip gains twice this). */
  delayMs?: number;
  /** Loss on each side, percent. */
  lossPct?: number;
}

export interface Link {
  a: string;
  b: string;
  /** Address of side a / side b on this link. */
  aAddr: string;
  bAddr: string;
  /** Whether netem shaped it (false: the kernel has no netem; the link is plain). */
  shaped: boolean;
  /** Takes the link down on both sides (no packet passes, sockets see nothing until it returns). */
  cut(): void;
  restore(): void;
}

function ip(args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

let labs = 0;
let swept = false;

export class NetnsLab {
  private readonly prefix: string;
  private readonly hosts = new Set<string>();
  private readonly procs: ChildProcess[] = [];
  private readonly stderrTails = new Map<ChildProcess, { what: string; text: string }>();
  private links = 0;

  /**
   * Labs of one process differ in names and addresses (a deleted namespace's veths may linger a
   * moment). `lab` picks the address block (10.213.8 lab.0/21, mod 32): a test file that may run
   * beside another netns test (jest's workers) takes a block of its own. @defaultValue the next of this process
   */
  constructor(private readonly lab: number = labs++) {
    this.prefix = `kais${process.pid}x${this.lab}`;
    if (!swept) NetnsLab.sweepStale();
    swept = true;
  }

  /**
   * Deletes the namespaces of labs whose process is gone (a run killed before destroy(); their veths
   * go with them): their addresses would shadow this lab's (same blocks), and its hosts would not reach
   * each other. Returns the names deleted.
   */
  static sweepStale(): string[] {
    const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    if (r.status !== 0) return [];
    const stale = r.stdout
      .split('\n')
      .map((l) => l.split(' ')[0])
      .filter((name) => {
        const m = /^kais(\d+)x\d+-/.exec(name);
        return m !== null && !alive(Number(m[1]));
      });
    for (const name of stale) spawnSync('ip', ['netns', 'del', name]);
    return stale;
  }

  /** null when namespaces can be made here, else the reason (for a skip message). */
  static unavailable(): string | null {
    if (process.platform !== 'linux') return 'network namespaces need Linux';
    if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'network namespaces need root (run as root, as CI does)';
    const probe = `kaisprobe${process.pid}`;
    const r = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
    if (r.error) return `ip is not installed (${r.error.message}; apt-get install iproute2)`;
    if (r.status !== 0) return `ip netns add failed: ${r.stderr.trim()}`;
    spawnSync('ip', ['netns', 'del', probe]);
    return null;
  }

  /** Whether this kernel has the netem qdisc (latency and loss). */
  static netem(): boolean {
    const probe = `kaisnetem${process.pid}`;
    try {
      ip(['link', 'add', probe, 'type', 'dummy']);
    } catch {
      return false;
    }
    try {
      return spawnSync('tc', ['qdisc', 'add', 'dev', probe, 'root', 'netem', 'delay', '1ms']).status === 0;
    } finally {
      spawnSync('ip', ['link', 'del', probe]);
    }
  }

  ns(host: string): string {
    return `${this.prefix}-${host}`;
  }

  addHost(host: string): void {
    ip(['netns', 'add', this.ns(host)]);
    this.hosts.add(host);
    ip(['-n', this.ns(host), 'link', 'set', 'lo', 'up']);
  }

  /** A veth pair between two hosts ("root": this namespace), addresses on a /30, shaped on both sides. */
  link(a: string, b: string, shape: LinkShape = {}): Link {
    const k = this.links++;
    const ifA = `k${process.pid % 10000}x${this.lab}l${k}a`;
    const ifB = `k${process.pid % 10000}x${this.lab}l${k}b`;
    if (k >= 512) throw new Error('NetnsLab: at most 512 links per lab');
    const third = (this.lab % 32) * 8 + (k % 8);
    const fourth = 4 * Math.floor(k / 8);
    const aAddr = `10.213.${third}.${fourth + 1}`;
    const bAddr = `10.213.${third}.${fourth + 2}`;
    const dev = (host: string) => (host === 'root' ? [] : ['-n', this.ns(host)]);
    ip(['link', 'add', ifA, 'type', 'veth', 'peer', 'name', ifB]);
    if (a !== 'root') ip(['link', 'set', ifA, 'netns', this.ns(a)]);
    if (b !== 'root') ip(['link', 'set', ifB, 'netns', this.ns(b)]);
    ip([...dev(a), 'addr', 'add', `${aAddr}/30`, 'dev', ifA]);
    ip([...dev(b), 'addr', 'add', `${bAddr}/30`, 'dev', ifB]);
    ip([...dev(a), 'link', 'set', ifA, 'up']);
    ip([...dev(b), 'link', 'set', ifB, 'up']);
    let shaped = false;
    if ((shape.delayMs ?? 0) > 0 || (shape.lossPct ?? 0) > 0) {
      const args = ['qdisc', 'add', 'dev'];
      const netem = ['root', 'netem', 'delay', `${shape.delayMs ?? 0}ms`, 'loss', `${shape.lossPct ?? 0}%`];
      const tc = (host: string, ifc: string) =>
        host === 'root'
          ? spawnSync('tc', [...args, ifc, ...netem]).status === 0
          : spawnSync('ip', ['netns', 'exec', this.ns(host), 'tc', ...args, ifc, ...netem]).status === 0;
      shaped = tc(a, ifA) && tc(b, ifB);
    }
    const set = (state: 'up' | 'down') => {
      ip([...dev(a), 'link', 'set', ifA, state]);
      ip([...dev(b), 'link', 'set', ifB, state]);
    };
    return { a, b, aAddr, bAddr, shaped, cut: () => set('down'), restore: () => set('up') };
  }

  /** Runs a command inside a host's namespace (killed by destroy()). */
  spawn(host: string, command: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
    const p =
      host === 'root'
        ? spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
        : spawn('ip', ['netns', 'exec', this.ns(host), command, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.procs.push(p);
    const tail = { what: `${host}: ${[command, ...args.filter((a) => a.length < 200)].join(' ')}`, text: '' };
    this.stderrTails.set(p, tail);
    p.stderr?.on('data', (c: Buffer) => (tail.text = (tail.text + c.toString()).slice(-3000)));
    return p;
  }

  /** The last lines each process wrote on stderr (for a failure message). */
  tails(): string {
    return [...this.stderrTails.values()].map((t) => `--- ${t.what}\n${t.text.slice(-1500)}`).join('\n');
  }

  /** Stops what it started (SIGTERM, then SIGKILL after 5 s) and deletes its namespaces. */
  async destroy(): Promise<void> {
    await Promise.all(
      this.procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            const t = setTimeout(() => p.kill('SIGKILL'), 5000);
            p.once('exit', () => {
              clearTimeout(t);
              resolve();
            });
            p.kill('SIGTERM');
          }),
      ),
    );
    for (const h of this.hosts) spawnSync('ip', ['netns', 'del', this.ns(h)]);
    this.hosts.clear();
  }
}

/** Resolves with the first JSON line of p's stdout that has `ready` (the kais processes' ready line). */
export function readyLine<T extends object>(p: ChildProcess, what: string, timeoutMs = 30_000): Promise<T> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const t = setTimeout(() => reject(new Error(`${what}: no ready line in ${timeoutMs} ms; stderr: ${err.slice(-2000)}`)), timeoutMs);
    p.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-20_000)));
    p.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      for (const line of out.split('\n'))
        if (line.startsWith('{') && line.includes('"ready"')) {
          clearTimeout(t);
          resolve(JSON.parse(line) as T);
          return;
        }
    });
    p.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`${what} exited with ${code} before its ready line; stderr: ${err.slice(-2000)}`));
    });
  });
}
