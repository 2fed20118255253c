/**
 * Jest setup (jest.config.js `setupFiles`, run in every test file before its tests).
 *
 * tfjs's cpu backend advises, on its first tensor in a process, to install @tensorflow/tfjs-node
 * ("Hi, looks like you are running TensorFlow.js in Node.js..."). Tests run library code on the
 * cpu backend on purpose (library code never picks a backend: shared/tf-backend.ts; a test that
 * needs another calls loadBackend() as an entry point), and jest prints that advice once per test
 * file with a stack trace. Only that one message is dropped here; every other warning, tfjs's or
 * ours, still prints. The CLI never shows it: its entry points choose wasm (loadBackend) before
 * the first tensor, so the cpu backend is never used there.
 */
const NODE_BACKEND_ADVICE = 'looks like you are running TensorFlow.js in Node.js';

const warn = console.warn.bind(console);
console.warn = (...args: unknown[]): void => {
  if (typeof args[0] === 'string' && args[0].includes(NODE_BACKEND_ADVICE)) return;
  warn(...args);
};
