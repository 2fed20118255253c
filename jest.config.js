/**
 * Tests run from TypeScript sources through swc (no type check here: `npm test` runs tsc first).
 * One jest run covers every layer (`npm test`); `npm run test:unit`, `test:integration` and
 * `test:smoke` run one layer (unit also holds test/conformance, the environment checkers).
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] },
  setupFiles: ['<rootDir>/test/setup/quiet-tfjs.ts'],
  testTimeout: 60000,
};
