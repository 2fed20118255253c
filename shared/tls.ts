/**
 * TLS for the orchestrator's ports (wss:// for agents, https:// for the admin API, dashboard and
 * metrics) and the agent's ingress (issue 18 item 5): certificate and key files read and checked
 * once at start, with one-line errors naming the file, and a self-signed pair made at run time for
 * `kais up --tls` and the tests (the `selfsigned` package: Node's WebCrypto, no openssl binary).
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError } from './errors';

/** Certificate chain and private key (PEM), as node:tls takes them. */
export interface TlsPair {
  cert: string;
  key: string;
}

/** Paths as a config or the command line give them. */
export interface TlsFiles {
  cert: string;
  key: string;
}

function readPem(file: string, what: string, owner: string, kind: 'CERTIFICATE' | 'PRIVATE KEY'): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`${owner}: cannot read the ${what} ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const ok = kind === 'CERTIFICATE' ? /-----BEGIN CERTIFICATE-----/.test(text) : /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text);
  if (!ok) throw new UsageError(`${owner}: the ${what} ${file} is not a PEM ${kind.toLowerCase()}`);
  return text;
}

/**
 * Reads and checks a certificate and its key: both PEM, the key parses, and it is the certificate's
 * own key (a mismatch is the classic mistake; node:tls would only say so at the first handshake).
 * `owner` names where they came from (a flag or a config key) in the error.
 */
export function loadTlsPair(files: TlsFiles, owner: string): TlsPair {
  const cert = readPem(files.cert, 'certificate', owner, 'CERTIFICATE');
  const key = readPem(files.key, 'key', owner, 'PRIVATE KEY');
  let priv: crypto.KeyObject;
  let x509: crypto.X509Certificate;
  try {
    priv = crypto.createPrivateKey(key);
  } catch (e) {
    throw new UsageError(`${owner}: the key ${files.key} does not parse: ${(e as Error).message}`);
  }
  try {
    x509 = new crypto.X509Certificate(cert);
  } catch (e) {
    throw new UsageError(`${owner}: the certificate ${files.cert} does not parse: ${(e as Error).message}`);
  }
  if (!x509.checkPrivateKey(priv)) throw new UsageError(`${owner}: the key ${files.key} is not the key of the certificate ${files.cert}`);
  return { cert, key };
}

/** A CA bundle (PEM certificates) that peers' certificates are checked against. */
export function loadCa(file: string, owner: string): string {
  const ca = readPem(file, 'CA certificate', owner, 'CERTIFICATE');
  try {
    new crypto.X509Certificate(ca);
  } catch (e) {
    throw new UsageError(`${owner}: the CA certificate ${file} does not parse: ${(e as Error).message}`);
  }
  return ca;
}

/**
 * A self-signed certificate (EC P-256, SHA-256, valid for `days`) for 127.0.0.1, ::1 and localhost
 * plus `hosts`, written as cert.pem and key.pem (mode 0600) into `dir`; it is its own CA.
 */
export async function writeSelfSignedPair(dir: string, hosts: string[] = [], days = 7): Promise<{ files: TlsFiles; pair: TlsPair }> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const selfsigned = require('selfsigned') as {
    generate(attrs: { name: string; value: string }[], o: Record<string, unknown>): Promise<{ private: string; cert: string }>;
  };
  const notBefore = new Date(Date.now() - 60_000);
  const altNames = [
    { type: 7, ip: '127.0.0.1' },
    { type: 7, ip: '::1' },
    { type: 2, value: 'localhost' },
    ...hosts.map((h) => (/^[\d.]+$|:/.test(h) ? { type: 7, ip: h } : { type: 2, value: h })),
  ];
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'kais' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: notBefore,
    notAfterDate: new Date(notBefore.getTime() + days * 86_400_000),
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  fs.mkdirSync(dir, { recursive: true });
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  fs.writeFileSync(cert, pems.cert);
  fs.writeFileSync(key, pems.private, { mode: 0o600 });
  return { files: { cert, key }, pair: { cert: pems.cert, key: pems.private } };
}
