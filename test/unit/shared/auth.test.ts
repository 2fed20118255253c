/** shared/auth.ts: the Authorization header's Bearer token, compared in constant time. */
import { bearerMatches, isBearerToken } from '../../../shared/auth';

describe('bearerMatches', () => {
  it('takes the token after the Bearer scheme, whose name is case-insensitive (RFC 9110 11.1)', () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) expect(bearerMatches(`${scheme} s3cret-token`, 's3cret-token')).toBe(true);
  });

  it('refuses another token, another scheme, no header; no token configured lets anything through', () => {
    expect(bearerMatches('Bearer guess', 's3cret-token')).toBe(false);
    expect(bearerMatches('Basic s3cret-token', 's3cret-token')).toBe(false);
    expect(bearerMatches('Bearers3cret-token', 's3cret-token')).toBe(false);
    expect(bearerMatches(undefined, 's3cret-token')).toBe(false);
    expect(bearerMatches(undefined, null)).toBe(true);
  });

  it('isBearerToken: printable ASCII without spaces', () => {
    expect(isBearerToken('abc-123_~')).toBe(true);
    expect(isBearerToken('a b')).toBe(false);
    expect(isBearerToken('')).toBe(false);
  });
});
