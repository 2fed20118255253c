/**
 * Bearer tokens on the plain-HTTP admin ports (the emulated cluster's, the orchestrator's): the
 * token of `Authorization: Bearer <token>` compared in constant time, through fixed-length hashes
 * so that not even the length leaks.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

const sha256 = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** Whether `token` can be carried by `Authorization: Bearer <token>`: printable ASCII without spaces (headers are trimmed, bytes above 0x7e mangled). */
export function isBearerToken(token: string): boolean {
  return /^[\x21-\x7e]+$/.test(token);
}

/** The headers of a 401 (RFC 9110 11.6.1): the scheme the token goes in. */
export const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer' } as const;

/** Whether an Authorization header carries the token; no token (null): anything goes. */
export function bearerMatches(header: string | undefined, token: string | null): boolean {
  if (token === null) return true;
  // the scheme is case-insensitive (RFC 9110 11.1): "bearer <token>" was refused
  const given = /^Bearer (.+)$/i.exec(header ?? '')?.[1];
  return given !== undefined && timingSafeEqual(sha256(given), sha256(token));
}
