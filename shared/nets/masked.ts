/**
 * The policy context embedding of cA2C/KaiS (kais-reconstruction.md 2.1, 2.6): a positive score
 * per target q = ReLU(W h + b) + 1 >= 1, masked and L1-normalised:
 *
 *   pi(a|o) = q_a m_a / sum_a' q_a' m_a'
 *
 * Tensor versions for the learner (the *true* log-probability log q_a - log sum q m, not the demo's
 * log_softmax of probabilities; no epsilon is needed because q >= 1 on valid targets), and
 * Float32Array versions for the actor's hot path. Masks are 0/1.
 */
import * as tf from '@tensorflow/tfjs';

/** pi = q m / sum(q m). q, mask: [batch, A] -> [batch, A]. Call inside tf.tidy. */
export function maskedPolicy(q: tf.Tensor2D, mask: tf.Tensor2D): tf.Tensor2D {
  const qm = tf.mul(q, mask);
  return tf.div(qm, tf.sum(qm, 1, true)) as tf.Tensor2D;
}

/**
 * log pi(a|o) = log q_a - log sum_a' q_a' m_a'. q, mask: [batch, A]; actions: [batch] int32 ->
 * [batch]. The action must be valid under the mask (it was sampled from it). Call inside tf.tidy.
 */
export function maskedLogProb(q: tf.Tensor2D, mask: tf.Tensor2D, actions: tf.Tensor1D): tf.Tensor1D {
  const A = q.shape[1];
  const qa = tf.sum(tf.mul(q, tf.oneHot(actions, A).toFloat()), 1);
  return tf.sub(tf.log(qa), tf.log(tf.sum(tf.mul(q, mask), 1))) as tf.Tensor1D;
}

/**
 * Entropy H(pi) = -sum_a pi_a log pi_a over the valid targets, exact (log pi_a = log q_a - log S
 * on valid ones, invalid ones contribute 0). [batch, A] -> [batch]. Call inside tf.tidy.
 */
export function maskedEntropy(q: tf.Tensor2D, mask: tf.Tensor2D): tf.Tensor1D {
  const qm = tf.mul(q, mask);
  const s = tf.sum(qm, 1, true);
  const pi = tf.div(qm, s);
  const logPi = tf.sub(tf.log(q), tf.log(s));
  return tf.neg(tf.sum(tf.mul(pi, logPi), 1)) as tf.Tensor1D;
}

// ------------------------------------------------------------------------------- Float32Array

export { argmaxMasked, maskedPolicyRow, sampleMasked } from './masked-f32';
