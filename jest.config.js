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
};
