import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** The repository's Dockerfile as the checks read it. */
export interface Dockerfile {
  stages: Array<{ from: string; as: string | undefined; lines: string[] }>;
  /** The final stage's CMD and ENTRYPOINT (exec form). */
  cmd: string[];
  entrypoint: string[];
  /** The sources of the final stage's `COPY --from=...` lines, e.g. `/app/dist`. */
  copiedFromBuild: string[];
}

/** Reads the Dockerfile: stages (instructions joined across line continuations, comments left out), final CMD, ENTRYPOINT and copies. */
export function dockerfile(): Dockerfile {
  const text = readFileSync(join(REPO, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const stages: Dockerfile['stages'] = [];
  for (const line of lines) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) stages.push({ from: from[1] ?? '', as: from[2], lines: [] });
    else stages.at(-1)?.lines.push(line);
  }
  const last = stages.at(-1)?.lines ?? [];
  const json = (op: string): string[] => {
    const line = [...last].reverse().find((l) => l.startsWith(`${op} `));
    return line === undefined ? [] : (JSON.parse(line.slice(op.length + 1)) as string[]);
  };
  const copiedFromBuild = last.filter((l) => /^COPY\s+--from=/.test(l)).map((l) => l.split(/\s+/).at(-2) ?? '');
  return { stages, cmd: json('CMD'), entrypoint: json('ENTRYPOINT'), copiedFromBuild };
}
