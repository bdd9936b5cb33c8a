import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readLimited } from './read-limited.js';

describe('readLimited', () => {
  it('reads a body within the bound as UTF-8, split characters included', async () => {
    const bytes = Buffer.from('日本語 text');
    const body = Readable.from([bytes.subarray(0, 4), bytes.subarray(4)]);
    expect(await readLimited(body, 100)).toBe('日本語 text');
  });

  it('answers undefined and destroys the stream once it grows past the bound', async () => {
    const body = Readable.from((function* () {
      for (let i = 0; i < 1000; i += 1) yield Buffer.alloc(1024);
    })());
    expect(await readLimited(body, 10 * 1024)).toBeUndefined();
    expect(body.destroyed).toBe(true);
  });
});
