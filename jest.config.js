/**
 * Tests run from TypeScript sources through swc (no type check here: `npm test` runs tsc first).
 * One jest run covers every layer (`npm test`); `npm run test:unit`, `test:integration` and
 * `test:smoke` run one layer (unit also holds test/conformance, the environment checkers).
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }],
    // @kubernetes/client-node 1.x and its OpenID deps are ES modules only: compiled to CommonJS for jest
    '^.+/node_modules/.+\\.m?js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!(@kubernetes/client-node|openid-client|oauth4webapi|jose)/)'],
  setupFiles: ['<rootDir>/test/setup/quiet-tfjs.ts'],
  testTimeout: 60000,
  // Two test files at a time, not jest's default of (cores - 1), which is 1 on the 2-core CI machine:
  // much of the suite waits on real processes, sockets and timers (up.integration, the canary drill),
  // so a second worker overlaps that idle time. Measured on the 2-core VM: 377 s against 749-812 s
  // in band (session 33). Tests wait for events, not for wall-clock luck, so sharing the CPU is safe.
  maxWorkers: 2,
  // jest runs every module inside a vm context, where each read of a global (Math.max, Number.isFinite,
  // Infinity) goes through the context's interceptor: measured ~100x slower than in plain node
  // (jestjs/jest#5163, nodejs/node#31658), which made the simulator's hot loops (agent/local-view.ts
  // queueLen, shared/eta.ts) 7x slower under jest than under node (telemetry.test's agent-view episode:
  // 17 s against 2.4 s). Injected, they are the context's own objects passed to each module's wrapper as
  // parameters: the same values, read as locals.
  sandboxInjectedGlobals: ['Math', 'Number', 'Infinity'],
};
