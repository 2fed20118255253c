/**
 * Adam (Kingma & Ba) over a fixed list of tfjs variables, with a state that round-trips exactly
 * through Float32Arrays. Not tf.train.adam: its setWeights() recomputes beta^t with pow() instead
 * of the running product it used before, so a resumed run would drift from an uninterrupted one
 * in the last bits; here the bias corrections are JS doubles from the step count alone.
 *
 *   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
 *   theta <- theta - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 */
import * as tf from '@tensorflow/tfjs';

export interface AdamState {
  step: number;
  /** [m_0..m_k, v_0..v_k] in variable order */
  moments: Float32Array[];
}

export class Adam {
  private step = 0;
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];

  constructor(
    private readonly vars: tf.Variable[],
    public lr: number,
    readonly beta1 = 0.9,
    readonly beta2 = 0.999,
    readonly eps = 1e-8,
  ) {
    // tidy frees the zerosLike tensors the variables were made from
    this.m = tf.tidy(() => vars.map((x) => tf.variable(tf.zerosLike(x), false)));
    this.v = tf.tidy(() => vars.map((x) => tf.variable(tf.zerosLike(x), false)));
  }

  /** One step with grads[i] for vars[i]; does not dispose the grads. */
  apply(grads: tf.Tensor[]): void {
    this.step++;
    const c1 = 1 - Math.pow(this.beta1, this.step);
    const c2 = 1 - Math.pow(this.beta2, this.step);
    tf.tidy(() => {
      this.vars.forEach((x, i) => {
        const g = grads[i];
        const m = tf.add(tf.mul(this.m[i], this.beta1), tf.mul(g, 1 - this.beta1));
        const v = tf.add(tf.mul(this.v[i], this.beta2), tf.mul(tf.square(g), 1 - this.beta2));
        this.m[i].assign(m);
        this.v[i].assign(v);
        const upd = tf.div(tf.div(m, c1), tf.add(tf.sqrt(tf.div(v, c2)), this.eps));
        x.assign(tf.sub(x, tf.mul(upd, this.lr)));
      });
    });
  }

  getState(): AdamState {
    return {
      step: this.step,
      moments: [...this.m, ...this.v].map((t) => Float32Array.from(t.dataSync() as Float32Array)),
    };
  }

  setState(s: AdamState): void {
    const k = this.vars.length;
    if (s.moments.length !== 2 * k) throw new TypeError(`Adam.setState: expected ${2 * k} moment arrays, got ${s.moments.length}`);
    tf.tidy(() => {
      for (let i = 0; i < k; i++) {
        this.m[i].assign(tf.tensor(s.moments[i], this.vars[i].shape));
        this.v[i].assign(tf.tensor(s.moments[k + i], this.vars[i].shape));
      }
    });
    this.step = s.step;
  }

  dispose(): void {
    for (const t of [...this.m, ...this.v]) t.dispose();
  }
}
