import { rename, writeFile } from 'node:fs/promises';

/** The classic Nacos label-selector scenario as a CMDB file: providers 11/22, consumers 33/44/55. */
export const NACOS_SCENARIO_YAML = `
labels:
  site: [x11, x12, x13]
entities:
  ip:
    11.11.11.11: {site: x11}
    22.22.22.22: {site: x12}
    33.33.33.33: {site: x11}
    44.44.44.44: {site: x12}
    55.55.55.55: {site: x13}
`;

/** Replaces a file in one step (write aside, rename), as editors and config management do. */
export async function replaceFile(path: string, text: string): Promise<void> {
  const aside = `${path}.tmp-${process.hrtime.bigint()}`;
  await writeFile(aside, text);
  await rename(aside, path);
}
