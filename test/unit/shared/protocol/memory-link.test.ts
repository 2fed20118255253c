import { createMemoryLinkPair, type FrameEndpoint } from '../../../../shared/protocol/memory-link';
import { decodeFrame, encodeFrame } from '../../../../shared/protocol/codec';
import { sampleFrames } from './sample-frames';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

function collect(end: FrameEndpoint): Uint8Array[] {
  const got: Uint8Array[] = [];
  end.onFrame((b) => got.push(b));
  return got;
}

describe.each(['immediate', 'microtask'] as const)('memory link (%s delivery)', (delivery) => {
  it('delivers asynchronously, in order, in both directions', async () => {
    const [a, b] = createMemoryLinkPair({ delivery });
    const atB = collect(b);
    const atA = collect(a);
    for (let i = 0; i < 5; i++) a.send(Uint8Array.of(i));
    b.send(Uint8Array.of(42));
    expect(atB).toEqual([]); // nothing arrives synchronously
    await tick();
    await tick();
    expect(atB.map((x) => x[0])).toEqual([0, 1, 2, 3, 4]);
    expect(atA.map((x) => x[0])).toEqual([42]);
  });

  it('copies each message so the sender may reuse its buffer', async () => {
    const [a, b] = createMemoryLinkPair({ delivery });
    const got = collect(b);
    const buf = Uint8Array.of(1, 2, 3);
    a.send(buf);
    buf[0] = 9;
    await tick();
    expect(Array.from(got[0])).toEqual([1, 2, 3]);
  });

  it('carries encoded frames that decode on the other side', async () => {
    const [agent, hub] = createMemoryLinkPair({ delivery });
    const got = collect(hub);
    for (const f of sampleFrames()) agent.send(encodeFrame(f));
    await tick();
    expect(
      got.map((b) => {
        const r = decodeFrame(b);
        return r.ok ? r.frame : r.error.message;
      }),
    ).toEqual(sampleFrames());
  });

  it('delivers messages sent before close, then reports close once on both ends', async () => {
    const [a, b] = createMemoryLinkPair({ delivery });
    const events: string[] = [];
    b.onFrame((x) => events.push(`frame ${x[0]}`));
    a.onClose((code, reason) => events.push(`a closed ${code} ${reason}`));
    b.onClose((code, reason) => events.push(`b closed ${code} ${reason}`));
    a.send(Uint8Array.of(1));
    a.close(4001, 'bye');
    a.close();
    expect(a.closed && b.closed).toBe(true);
    expect(a.send(Uint8Array.of(2))).toBe(false);
    expect(b.send(Uint8Array.of(3))).toBe(false);
    await tick();
    await tick();
    expect(events).toEqual(['frame 1', 'a closed 4001 bye', 'b closed 4001 bye']);
  });

  it('stops calling a listener once it is removed', async () => {
    const [a, b] = createMemoryLinkPair({ delivery });
    const got: number[] = [];
    const off = b.onFrame((x) => got.push(x[0]));
    a.send(Uint8Array.of(1));
    await tick();
    off();
    a.send(Uint8Array.of(2));
    await tick();
    expect(got).toEqual([1]);
  });
});

describe('memory link options', () => {
  it('refuses an unknown delivery mode with a TypeError naming the option', () => {
    expect(() => createMemoryLinkPair({ delivery: 'sync' as 'immediate' })).toThrow(/options\.delivery/);
  });
});
