import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { envSchema } from '../src/config/config.js';
import { ERROR_CATALOGUE } from '../src/http/errors.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

it('documents every environment variable in the configuration table', () => {
  for (const variable of Object.keys(envSchema.shape))
    expect(readme, variable).toMatch(new RegExp(`^\\| \`${variable}\` \\|`, 'm'));
});

it('lists every error code with its status and type', () => {
  for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
    expect(readme, code).toContain(`| \`${code}\` | ${entry.status} | \`${entry.type}\` |`);
  }
});

it('starts with the two quick-start commands', () => {
  expect(readme).toContain('npm ci && npm start');
  expect(readme).toContain('npm ci && npm test');
});
