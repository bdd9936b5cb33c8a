/**
 * The whole of a response body as UTF-8 text, or undefined once it grows past `maxBytes` (the
 * stream is then destroyed): an answer too large to parse without holding the event loop is
 * refused before it is all in memory.
 */
export async function readLimited(body: AsyncIterable<Buffer> & { destroy(): void }, maxBytes: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
