/**
 * The model registry: the one place that issues weight and placement versions. A new weights
 * version is written to the store first and only then broadcast, so an agent can never hold weights
 * the orchestrator would forget on a restart. A placement is published after the executor changed
 * the cluster: when the store cannot keep it (database or disk full, with `storeWrite`), it is
 * still pushed, since agents whose masks miss the cluster's change would send requests to replicas
 * that are gone; after a restart the orchestrator serves its last stored placement, and agents
 * holding a newer number of the same epoch take it (agent/runtime.ts: held versions above the
 * current are not trusted). It also records, from the hub's events, which agent is
 * connected and which versions it holds (its `hello`, then its acks).
 *
 * Restart: `Store.open(file)` + `startHub(store, options)` serves the latest stored weights and
 * placement; an agent that reconnects with them gets nothing new, one with older ones (or ones of
 * another store epoch) gets the current ones right after `welcome`. Every body carries the
 * store's epoch.
 */
import type { EapId, Placement } from '../shared/domain';
import {
  placementBody,
  type ActorHeadName,
  type ActorSlot,
  type LightActorBody,
  type PlacementBody,
  type WeightsBody,
} from '../shared/protocol/envelope';
import { packWeights, unpackWeights, type WeightTensor } from '../shared/protocol/weights';
import { Hub, type HubEvents, type HubOptions } from './hub';
import type { Store } from './store';

/** Starts a hub on `options` that resumes from the store's latest weights and placement. */
export async function startHub(store: Store, options: Omit<HubOptions, 'weights' | 'placement' | 'epoch'> = {}): Promise<Hub> {
  store.markAllDisconnected();
  const weights = store.latestModel();
  const placement = store.latestPlacement();
  if (weights) weights.epoch = store.epoch;
  if (placement) placement.epoch = store.epoch;
  return Hub.listen({ ...options, weights, placement, epoch: store.epoch });
}

export interface ModelRegistryOptions {
  /**
   * Runs a store write that may fail for reasons outside the program (main.ts StoreGuard): false
   * when it failed (logged there). Used for placements only. @defaultValue the write itself (a failure throws)
   */
  storeWrite?: (what: string, write: () => void) => boolean;
  /**
   * The light actor every version published from here on carries (the actor switch: the GPG
   * model's `scaleIn.light.actor`, docs/gpg.md); the learner and the canary change the main actor
   * only. @defaultValue none
   */
  lightActor?: LightActorBody;
}

export class ModelRegistry {
  private readonly detach: (() => void)[] = [];
  /** Whether the latest published placement is in the store; placements pushed that the store could not keep. */
  lastPlacementStored = true;
  unstoredPlacements = 0;

  constructor(
    private readonly store: Store,
    private readonly hub: Hub,
    private readonly o: ModelRegistryOptions = {},
  ) {
    const onSession: HubEvents['session'] = (s) => store.agentConnected(s.eapId, s.sessionId, s);
    const onClosed: HubEvents['sessionClosed'] = (s) => store.agentDisconnected(s.eapId, s.sessionId);
    const onApplied: HubEvents['applied'] = (s, kind, version) => store.agentApplied(s.eapId, kind, version);
    hub.on('session', onSession).on('sessionClosed', onClosed).on('applied', onApplied);
    this.detach.push(
      () => hub.off('session', onSession),
      () => hub.off('sessionClosed', onClosed),
      () => hub.off('applied', onApplied),
    );
  }

  get weightVersion(): number | null {
    return this.store.latestModelVersion();
  }

  /** The latest placement version published (stored, or pushed when the store could not keep it). */
  get placementVersion(): number | null {
    const stored = this.store.latestPlacementVersion();
    const pushed = this.hub.placementVersion;
    return stored === null ? pushed : pushed === null ? stored : Math.max(stored, pushed);
  }

  /** New actor weights (in `model.getWeights()` order) and the head they were trained with (carried to the agents): next version, stored, then pushed to every agent. */
  publishWeights(tensors: readonly WeightTensor[], head?: ActorHeadName): WeightsBody {
    const body = this.pack(tensors, head);
    this.store.putModel(body);
    this.hub.broadcastWeights(body);
    return body;
  }

  /** A canary (orchestrator/canary.ts): next version, stored, then pushed to the agents of `eaps` only. */
  publishCanary(tensors: readonly WeightTensor[], head: ActorHeadName | undefined, eaps: readonly EapId[]): WeightsBody {
    const body = this.pack(tensors, head);
    this.store.putModel(body);
    this.hub.startCanary(eaps, body);
    return body;
  }

  /** The next version's body: the tensors, the store's epoch and the light actor (options.lightActor). */
  private pack(tensors: readonly WeightTensor[], head: ActorHeadName | undefined): WeightsBody {
    const body = packWeights(tensors, (this.store.latestModelVersion() ?? 0) + 1, head);
    body.epoch = this.store.epoch;
    if (this.o.lightActor) body.light = this.o.lightActor;
    return body;
  }

  /** The running canary's version goes to every agent (it is already stored). */
  promoteCanary(): void {
    this.hub.promoteCanary();
  }

  /**
   * Rollback: a new version holding the weights of stored version `good`, pushed to every agent
   * (it ends a canary). A new number, not `good` itself: agents apply only versions above the one
   * they hold, and a restart serves the latest stored version.
   */
  restore(good: number): WeightsBody {
    const old = this.store.model(good);
    if (!old) throw new TypeError(`ModelRegistry.restore: no stored weights v${good}`);
    return this.publishWeights(unpackWeights(old), old.head);
  }

  /**
   * New placement d[w][n] for orchestration frame `frame` (with `actor`: the actor the agents use from
   * then on, the actor switch): next version, stored (if the store can), then pushed.
   */
  publishPlacement(frame: number, d: Placement, actor?: ActorSlot): PlacementBody {
    const body = placementBody((this.placementVersion ?? 0) + 1, frame, d);
    body.epoch = this.store.epoch;
    if (actor !== undefined) body.actor = actor;
    const put = () => this.store.putPlacement(body);
    const stored = this.o.storeWrite ? this.o.storeWrite(`placement v${body.version}`, put) : (put(), true);
    this.lastPlacementStored = stored;
    if (!stored) this.unstoredPlacements++;
    this.hub.broadcastPlacement(body);
    return body;
  }

  /** Weight version held by each connected agent (null: none yet). */
  holders(): Map<EapId, number | null> {
    return new Map(this.hub.sessions().map((s) => [s.eapId, s.weightVersion]));
  }

  dispose(): void {
    this.detach.splice(0).forEach((f) => f());
  }
}
