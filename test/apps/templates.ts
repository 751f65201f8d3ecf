/**
 * The example files are written for people (real-looking ports and paths); tests turn
 * them into runnable configs by replacing those literal values. Every replacement must
 * match at least once, so an edited example cannot silently escape its test.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../helpers/paths.js';

export const EXAMPLES = join(REPO_ROOT, 'examples');

export function fillTemplate(text: string, replacements: ReadonlyArray<readonly [string, string]>, what = 'template'): string {
  let out = text;
  for (const [from, to] of replacements) {
    if (!out.includes(from)) throw new Error(`${what}: expected to find ${JSON.stringify(from)} to replace`);
    out = out.split(from).join(to);
  }
  return out;
}

/** An example file with its placeholders replaced. */
export function exampleFile(rel: string, replacements: ReadonlyArray<readonly [string, string]>): string {
  return fillTemplate(readFileSync(join(EXAMPLES, rel), 'utf8'), replacements, `examples/${rel}`);
}
