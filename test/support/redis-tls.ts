import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { freePort } from './ports.js';
import { findExecutable, makeTempDir, ManagedProcess, removeTempDir, waitForReady } from './server-process.js';

/** PEM files made by {@link makeCertificates}. */
export interface TestCertificates {
  dir: string;
  /** The CA that signs the others. */
  ca: string;
  /** The server's certificate (SAN IP 127.0.0.1 and DNS localhost) and key. */
  serverCert: string;
  serverKey: string;
  /** A client certificate and key, for servers that ask for one. */
  clientCert: string;
  clientKey: string;
}

/**
 * Makes a CA, a server certificate for 127.0.0.1 / localhost and a client certificate with the
 * `openssl` CLI into `dir` (each run its own keys: nothing secret is checked in).
 */
export function makeCertificates(dir: string): TestCertificates {
  const openssl = findExecutable('openssl');
  if (!openssl) throw new Error('openssl is needed to make test certificates: apt-get install -y openssl');
  const at = (name: string) => join(dir, name);
  const run = (...args: string[]) => execFileSync(openssl, args, { cwd: dir, stdio: 'pipe' });
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('ca.key'), '-out', at('ca.crt'), '-days', '2', '-subj', '/CN=regsync test CA');
  const sign = (name: string, subject: string, ext: string) => {
    writeFileSync(at(`${name}.ext`), ext);
    run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', at(`${name}.key`), '-out', at(`${name}.csr`), '-subj', subject);
    run('x509', '-req', '-in', at(`${name}.csr`), '-CA', at('ca.crt'), '-CAkey', at('ca.key'), '-CAcreateserial', '-out', at(`${name}.crt`), '-days', '2', '-extfile', at(`${name}.ext`));
  };
  sign('server', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  sign('client', '/CN=regsync', 'extendedKeyUsage=clientAuth\n');
  return { dir, ca: at('ca.crt'), serverCert: at('server.crt'), serverKey: at('server.key'), clientCert: at('client.crt'), clientKey: at('client.key') };
}

/** A redis-server that speaks only TLS, with its certificates. */
export interface TlsRedis {
  readonly port: number;
  /** `rediss://127.0.0.1:<port>`. */
  readonly url: string;
  readonly certs: TestCertificates;
  cleanup(): Promise<void>;
}

/**
 * Starts redis-server on a free port on 127.0.0.1 with TLS only (`--port 0 --tls-port`), its own
 * certificates in a temp dir; `clientCertificates: true` makes it ask clients for a certificate
 * signed by the same CA. Resolves once a TLS client gets PONG.
 */
export async function startTlsRedis(opts: { clientCertificates?: boolean } = {}): Promise<TlsRedis> {
  const binary = findExecutable('redis-server');
  if (!binary) throw new Error('redis-server was not found on PATH: apt-get install -y redis-server');
  const dir = makeTempDir('regsync-redis-tls-');
  try {
    const certs = makeCertificates(dir);
    const port = await freePort();
    const logFile = join(dir, 'redis.log');
    const args = [
      '--port', '0',
      '--tls-port', String(port),
      '--bind', '127.0.0.1',
      '--tls-cert-file', certs.serverCert,
      '--tls-key-file', certs.serverKey,
      '--tls-ca-cert-file', certs.ca,
      '--tls-auth-clients', opts.clientCertificates ? 'yes' : 'no',
      '--dir', dir,
      '--save', '',
      '--appendonly', 'no',
      '--daemonize', 'no',
      '--logfile', '',
    ];
    const proc = new ManagedProcess(binary, args, { logFile, cwd: dir });
    await waitForReady(proc, () => tlsPing(port, certs), { what: `TLS redis-server on 127.0.0.1:${port}`, timeoutMs: 20_000, logFiles: [logFile] });
    return {
      port,
      url: `rediss://127.0.0.1:${port}`,
      certs,
      async cleanup() {
        await proc.stop();
        removeTempDir(dir);
      },
    };
  } catch (err) {
    removeTempDir(dir);
    throw err;
  }
}

function tlsPing(port: number, certs: TestCertificates): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, ca: readFileSync(certs.ca), cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) });
    let reply = '';
    socket.setTimeout(1_000, () => socket.destroy());
    socket.once('error', () => resolve(false));
    socket.once('secureConnect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('utf8');
      if (reply.includes('\r\n')) {
        socket.destroy();
        resolve(reply.startsWith('+PONG'));
      }
    });
    socket.once('close', () => resolve(false));
  });
}
