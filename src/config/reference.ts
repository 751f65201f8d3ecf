/**
 * docs/configuration.md, the configuration reference,, rendered from the key tables so a key is
 * described in one place (keys.ts). scripts/gen-docs.mjs writes it; a test checks it.
 */
import { CONFIG_KEYS } from './keys.js';

const cell = (s: string): string => s.replace(/\|/g, '\\|');

export function renderConfigReference(): string {
  const lines = ['| key | type | default | meaning |', '| --- | --- | --- | --- |'];
  for (const k of CONFIG_KEYS) {
    const def = k.required ? '(required)' : k.default === '' ? '–' : `\`${cell(k.default)}\``;
    lines.push(`| \`${cell(k.path)}\` | ${cell(k.type)} | ${def} | ${cell(k.description)} |`);
  }
  return lines.join('\n');
}

/** Replaces the text between `<!-- NAME:start -->` and `<!-- NAME:end -->`. */
export function replaceGenerated(doc: string, name: string, body: string): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  if (i < 0 || j < i) throw new Error(`the document has no ${start} … ${end} section`);
  return `${doc.slice(0, i + start.length)}\n${body}\n${doc.slice(j)}`;
}
