import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { describe, expect, it } from 'vitest';

/*
 * The layering rules of .dependency-cruiser.mjs (docs/layers.md), checked over
 * the sources the build compiles. A violation that is not in
 * .dependency-cruiser-known-violations.json fails, named by its rule.
 */

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function describeViolation(violation: IViolation): string {
  const path = violation.cycle?.map((step) => step.name).join(' -> ') ?? `${violation.from} -> ${violation.to}`;
  return `${violation.rule.name}: ${path}`;
}

describe('layering', () => {
  it('holds: no import breaks a rule of .dependency-cruiser.mjs but the known ones', async () => {
    const cwd = process.cwd();
    // The cruiser resolves the files to cruise and the tsconfig against the working directory.
    process.chdir(root);
    let result: ICruiseResult;
    try {
      const options = await extractDepcruiseOptions('./.dependency-cruiser.mjs');
      const knownViolations = JSON.parse(readFileSync('.dependency-cruiser-known-violations.json', 'utf8')) as ICruiseResult['summary']['violations'];
      const output = await cruise(
        ['src', 'adapters', 'bin'],
        { ...options, validate: true, knownViolations },
        {},
        { tsConfig: extractTSConfig('tsconfig.json') },
      );
      result = output.output as ICruiseResult;
    } finally {
      process.chdir(cwd);
    }
    const unresolved = result.modules.flatMap((module) =>
      module.dependencies.filter((dependency) => dependency.couldNotResolve).map((dependency) => `${module.source} -> ${dependency.module}`),
    );
    const broken = result.summary.violations.filter((violation) => violation.rule.severity !== 'ignore').map(describeViolation);
    // An import the cruiser cannot follow is one no rule sees.
    expect(unresolved, 'imports dependency-cruiser could not resolve').toEqual([]);
    expect(broken, 'imports that break a layering rule (docs/layers.md)').toEqual([]);
    // The rules are cruised over the whole of the sources, not a part the options left out.
    expect(result.summary.totalCruised).toBeGreaterThan(300);
  });
});
