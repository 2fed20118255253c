/**
 * A GPG model file as the greedy orchestration the entry points run: `kais eval`'s x/gpg pairs,
 * `kais up`'s prediction and the orchestrator's `"orchestration": "gpg"`. One reader, so a model
 * that does not fit the scenario is the same one-line UsageError everywhere, naming the flag or
 * config field it came from. tfjs loads with this module: entry points require it lazily, only for
 * gpg (the heuristic pairs never need tfjs).
 */
import * as fs from 'fs';
import * as path from 'path';
import { UsageError } from '../../shared/errors';
import type { Scenario } from '../../shared/scenario';
import type { GpgNet } from './gnn';
import { gpgModelFromJson, modelNodesPerFrame, type GpgModelMeta } from './model';
import { GpgOrchestration } from './policy';
import { WithHpaScaleIn } from '../../shared/orchestration/scale-in';
import type { OrchestrationPolicy } from '../../shared/policy';

/** The net of a GPG model file for this scenario; a UsageError `<source>: <file>: <problem>` otherwise. */
export function loadGpgNet(file: string, scenario: Scenario, source: string): GpgNet {
  return loadGpgModel(file, scenario, source).net;
}

/** loadGpgNet with the model's metadata (what it was trained with: `kais train --gpg-init` continues from it). */
export function loadGpgModel(file: string, scenario: Scenario, source: string): { net: GpgNet; meta: GpgModelMeta } {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`${source}: cannot read ${file} (${(e as Error).message})`);
  }
  try {
    return gpgModelFromJson(text, scenario.services.length);
  } catch (e) {
    throw new UsageError(`${source}: ${file}: ${(e as Error).message}`);
  }
}

/**
 * The greedy GPG of a model file, deciding once per `periodS` (the scenario's frame unless given),
 * on the model's `nodesPerFrame` nodes (the scenario's `scaleNodesPerFrame` when the model names
 * none), followed by hpa's scale-in when the model names one (`scaleIn`). dispose() frees its tfjs
 * variables.
 */
export function loadGpgOrchestration(
  file: string,
  scenario: Scenario,
  source: string,
  periodS: number = scenario.slotS * scenario.slotsPerFrame,
): OrchestrationPolicy & { dispose: () => void; nodesPerDecision: number; summary: string; lightActor: string | null } {
  const { net, meta } = loadGpgModel(file, scenario, source);
  const nodesPerDecision = modelNodesPerFrame(meta, scenario);
  const policy = withScaleIn(new GpgOrchestration(net, { periodS, nodesPerDecision, mode: 'greedy' }), meta);
  return Object.assign(policy, {
    dispose: () => net.dispose(),
    nodesPerDecision,
    summary: gpgSummary(file, nodesPerDecision, meta),
    lightActor: lightActorOf(file, meta, source),
  });
}

/**
 * The light actor a model names (`scaleIn.light.actor`: a file in the model's folder), as a path;
 * null when it names none. A UsageError `<source>: <file>: ...` when the file is not there.
 */
export function lightActorOf(file: string, meta: Pick<GpgModelMeta, 'scaleIn'>, source: string): string | null {
  const name = meta.scaleIn?.light?.actor;
  if (name === undefined) return null;
  const actor = path.join(path.dirname(file), name);
  if (!fs.existsSync(actor)) throw new UsageError(`${source}: ${file}: its light actor ${actor} does not exist`);
  return actor;
}

/** What a model file runs, in one line for an operator's log: the file, H and the scale-in if any. */
export function gpgSummary(file: string, nodesPerDecision: number, meta: Pick<GpgModelMeta, 'scaleIn'>): string {
  const head = `gpg ${file}: ${nodesPerDecision} node${nodesPerDecision === 1 ? '' : 's'} a decision`;
  const si = meta.scaleIn;
  if (!si) return `${head}, no scale-in`;
  const parts = [`target utilisation ${si.targetUtilisation}`];
  if (si.keepPerEap) parts.push('one replica kept per service and eAP');
  if (si.maxFailedShare !== undefined && si.maxFailedShare < 1) parts.push(`no removal above a failed share of ${si.maxFailedShare}`);
  if (si.regret !== undefined && si.regret < 1) parts.push(`a removal undone when the failed share rises by ${si.regret}`);
  if (si.light)
    parts.push(
      `below a failed share of ${si.light.belowFailedShare}: target ${si.light.targetUtilisation}${si.light.keepPerEap ? ', one kept per eAP' : ', none kept per eAP'}${
        si.light.maxFailedShare !== undefined ? `, no removal above a failed share of ${si.light.maxFailedShare}` : ''
      }`,
    );
  const actor = si.light?.actor;
  const switchText = actor
    ? `; actor switch: ${actor} dispatches in the first frame and after every light window, the main actor after any other`
    : '';
  return `${head}, then hpa's scale-in (${parts.join(', ')})${switchText}`;
}

/** GPG as its model runs it: followed by hpa's scale-in when the model names one. */
export function withScaleIn(gpg: OrchestrationPolicy, meta: Pick<GpgModelMeta, 'scaleIn'>): OrchestrationPolicy {
  const si = meta.scaleIn;
  if (!si) return gpg;
  return new WithHpaScaleIn(gpg, {
    targetUtilisation: si.targetUtilisation,
    keepPerEap: si.keepPerEap ?? false,
    maxFailedShare: si.maxFailedShare ?? 1,
    ...(si.regret !== undefined ? { regret: si.regret } : {}),
    ...(si.light
      ? {
          light: {
            belowFailedShare: si.light.belowFailedShare,
            targetUtilisation: si.light.targetUtilisation,
            keepPerEap: si.light.keepPerEap,
            ...(si.light.maxFailedShare !== undefined ? { maxFailedShare: si.light.maxFailedShare } : {}),
            ...(si.light.actor !== undefined ? { switchActor: true } : {}),
          },
        }
      : {}),
  });
}
