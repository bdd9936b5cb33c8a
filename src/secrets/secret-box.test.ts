import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSecretKey, SecretBox, secretBoxFrom, SecretKeyError } from './index.js';

const hexKey = randomBytes(32).toString('hex');
const base64Key = randomBytes(32).toString('base64');
const place = { cluster: 'shanghai', field: 'password' };

function thrown(fn: () => unknown): SecretKeyError {
  try {
    fn();
  } catch (err) {
    if (err instanceof SecretKeyError) return err;
    throw err;
  }
  throw new Error('expected a SecretKeyError');
}

describe('secret keys', () => {
  it('reads 32 bytes as hex or base64 (standard or URL alphabet, with or without padding), blanks around ignored', () => {
    const bytes = randomBytes(32);
    const id = parseSecretKey(bytes.toString('hex'), 'k').id;
    expect(id).toMatch(/^[0-9a-f]{8}$/);
    expect(parseSecretKey(`${bytes.toString('base64')}\n`, 'k').id).toBe(id);
    expect(parseSecretKey(bytes.toString('base64url'), 'k').id).toBe(id);
    expect(parseSecretKey(` ${bytes.toString('hex').toUpperCase()} `, 'k').id).toBe(id);
    expect(parseSecretKey(randomBytes(32).toString('hex'), 'k').id).not.toBe(id);
  });

  it('refuses other lengths naming the source, never quoting the key', () => {
    for (const bad of [randomBytes(16).toString('hex'), randomBytes(31).toString('base64'), 'not a key at all, but long enough to be one!!', '']) {
      const err = thrown(() => parseSecretKey(bad, 'REGSYNC_SECRET_KEY'));
      expect(err.code).toBe('invalid_key');
      expect(err.message).toContain('REGSYNC_SECRET_KEY');
      if (bad !== '') expect(err.message).not.toContain(bad);
    }
  });
});

describe('SecretBox', () => {
  const box = new SecretBox(parseSecretKey(hexKey, 'k'));

  it('encrypts into a versioned envelope naming the key, and decrypts it back', () => {
    const sealed = box.seal('s3cret-pw', place);
    expect(sealed).toMatch(/^enc:v1:[0-9a-f]{8}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain('s3cret-pw');
    expect(SecretBox.keyIdOf(sealed)).toBe(box.keyId);
    expect(box.open(sealed, place)).toBe('s3cret-pw');
    expect(box.open(box.seal('', place), place)).toBe('');
    expect(box.open(box.seal('密码 with unicode', place), place)).toBe('密码 with unicode');
  });

  it('writes the same secret at the same place as the same value (unchanged records stay unchanged), another secret or place differently', () => {
    expect(box.seal('pw', place)).toBe(box.seal('pw', place));
    expect(box.seal('pw2', place)).not.toBe(box.seal('pw', place));
    expect(box.seal('pw', { cluster: 'beijing', field: 'password' })).not.toBe(box.seal('pw', place));
  });

  it('refuses a value moved to another cluster, or altered', () => {
    const sealed = box.seal('pw', place);
    expect(thrown(() => box.open(sealed, { cluster: 'beijing', field: 'password' })).code).toBe('undecryptable');
    const last = sealed.at(-2) === 'A' ? 'B' : 'A';
    expect(thrown(() => box.open(`${sealed.slice(0, -2)}${last}${sealed.at(-1)}`, place)).code).toBe('undecryptable');
  });

  it('names the key id a value needs, and how to give it, when it lacks that key', () => {
    const sealed = box.seal('pw', place);
    for (const other of [SecretBox.none, new SecretBox(parseSecretKey(base64Key, 'k'))]) {
      const err = thrown(() => other.open(sealed, place));
      expect(err.code).toBe('key_missing');
      expect(err.keyId).toBe(box.keyId);
      expect(err.message).toContain(`secret key ${box.keyId as string}`);
      expect(err.message).toContain('REGSYNC_SECRET_KEY');
      expect(err.message).toContain('--secret-key-file');
      expect(err.message).not.toContain(hexKey);
    }
  });

  it('decrypts with a previous key, and tells what a rotation must write again', () => {
    const old = new SecretBox(parseSecretKey(base64Key, 'k'));
    const rotating = new SecretBox(parseSecretKey(hexKey, 'k'), [parseSecretKey(base64Key, 'k')]);
    const underOld = old.seal('pw', place);
    expect(rotating.open(underOld, place)).toBe('pw');
    expect(rotating.seal('pw', place)).toBe(box.seal('pw', place));
    expect(rotating.needsReseal(underOld)).toBe(true);
    expect(rotating.needsReseal('in clear')).toBe(true);
    expect(rotating.needsReseal(rotating.seal('pw', place))).toBe(false);
  });

  it('without a key stores and reads secrets as given', () => {
    expect(SecretBox.none.seal('pw', place)).toBe('pw');
    expect(SecretBox.none.open('pw', place)).toBe('pw');
    expect(SecretBox.none.needsReseal('pw')).toBe(false);
  });
});

describe('secretBoxFrom', () => {
  const dir = mkdtempSync(join(tmpdir(), 'regsync-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('takes the key from REGSYNC_SECRET_KEY or a file, and previous keys from the variable and a file', () => {
    const current = parseSecretKey(hexKey, 'k').id;
    const previous = parseSecretKey(base64Key, 'k').id;
    expect(secretBoxFrom({ env: { REGSYNC_SECRET_KEY: hexKey } }).keyId).toBe(current);
    const fromFiles = secretBoxFrom({ keyFile: file('current', `${hexKey}\n`), previousKeyFile: file('previous', `${base64Key}\n`), env: {} });
    expect(fromFiles.keyId).toBe(current);
    expect(fromFiles.keyIds.sort()).toEqual([current, previous].sort());
    expect(secretBoxFrom({ env: { REGSYNC_SECRET_KEY: base64Key, REGSYNC_SECRET_KEY_PREVIOUS: `${hexKey}, ${randomBytes(32).toString('hex')}` } }).keyIds).toHaveLength(3);
    expect(secretBoxFrom({ env: {} })).toBe(SecretBox.none);
    expect(secretBoxFrom({ env: { REGSYNC_SECRET_KEY: '' } })).toBe(SecretBox.none);
  });

  it('names the source of a key it cannot use, never the key', () => {
    const missing = thrown(() => secretBoxFrom({ keyFile: join(dir, 'nope'), env: {} }));
    expect(missing.code).toBe('unreadable_key');
    expect(missing.message).toContain(join(dir, 'nope'));
    expect(missing.message).toContain('--secret-key-file');
    const short = thrown(() => secretBoxFrom({ keyFile: file('short', 'c2hvcnQ='), env: {} }));
    expect(short.code).toBe('invalid_key');
    expect(short.message).toContain(join(dir, 'short'));
    expect(short.message).not.toContain('c2hvcnQ=');
    expect(thrown(() => secretBoxFrom({ env: { REGSYNC_SECRET_KEY_PREVIOUS: 'abc' } })).message).toContain('REGSYNC_SECRET_KEY_PREVIOUS entry 1');
  });

  it('refuses a key given two ways, and previous keys without a current one', () => {
    expect(thrown(() => secretBoxFrom({ keyFile: file('k', hexKey), env: { REGSYNC_SECRET_KEY: hexKey } })).code).toBe('conflicting_keys');
    expect(thrown(() => secretBoxFrom({ env: { REGSYNC_SECRET_KEY_PREVIOUS: hexKey } })).code).toBe('conflicting_keys');
  });
});
