/**
 * Settings of the learned detector shared by `kais detect` and the live detector
 * (orchestrator/detector.ts), in a module without tfjs so the orchestrator's main thread can read
 * them without loading it.
 */

/**
 * Threshold on the normalised score (critic/detector/vgru.ts): 0 = the held-out healthy windows'
 * 99th percentile (calibrationQuantile), chosen on the dev SMD machines (docs/detect.md).
 */
export const DETECT_ETA = 0;
