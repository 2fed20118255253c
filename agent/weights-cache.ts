/**
 * The agent's disk cache of the last weights and placement it applied, so that a restarted agent
 * dispatches with them before (or without) reaching the orchestrator. Weights use the checkpoint
 * buffer of shared/protocol/weights.ts (CRC-32 checked); the placement is a small JSON file.
 * Writes go to a temporary file renamed into place, so a crash never leaves half a file. A corrupt
 * or unreadable cache is ignored (returned as null), never fatal.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PlacementBody, WeightsBody } from '../shared/protocol/envelope';
import { weightsFromBytes, weightsToBytes } from '../shared/protocol/weights';

export class StateCache {
  constructor(readonly dir: string) {
    fs.mkdirSync(dir, { recursive: true });
  }

  private file(name: string): string {
    return path.join(this.dir, name);
  }

  private write(name: string, bytes: Uint8Array | string): void {
    const tmp = this.file(`${name}.tmp-${process.pid}`);
    fs.writeFileSync(tmp, bytes);
    fs.renameSync(tmp, this.file(name));
  }

  saveWeights(body: WeightsBody): void {
    this.write('weights.bin', weightsToBytes(body));
  }

  loadWeights(): WeightsBody | null {
    try {
      return weightsFromBytes(fs.readFileSync(this.file('weights.bin')));
    } catch {
      return null;
    }
  }

  savePlacement(body: PlacementBody): void {
    this.write('placement.json', JSON.stringify({ ...body, replicas: Array.from(body.replicas) }));
  }

  loadPlacement(): PlacementBody | null {
    try {
      const raw = JSON.parse(fs.readFileSync(this.file('placement.json'), 'utf8')) as Record<string, unknown>;
      const { version, frame, numServices, numNodes, replicas } = raw;
      if (
        !Number.isSafeInteger(version) ||
        !Number.isSafeInteger(frame) ||
        !Number.isSafeInteger(numServices) ||
        !Number.isSafeInteger(numNodes) ||
        !Array.isArray(replicas) ||
        replicas.length !== (numServices as number) * (numNodes as number) ||
        !replicas.every((k) => Number.isInteger(k) && k >= 0)
      ) {
        return null;
      }
      return {
        version: version as number,
        frame: frame as number,
        numServices: numServices as number,
        numNodes: numNodes as number,
        replicas: Int32Array.from(replicas as number[]),
      };
    } catch {
      return null;
    }
  }
}
