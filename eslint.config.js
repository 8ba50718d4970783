// Lint profile: ESLint's and typescript-eslint's recommended rules, type-aware where it matters.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import { layerRules } from './eslint.layers.js';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', '.data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-console': 'off',
    },
  },
  {
    // Functions read as a sequence of named steps (docs/architecture.md); migrations are data-like and exempt.
    files: ['src/**/*.ts'],
    ignores: ['src/store/migrations/**'],
    rules: { 'max-lines-per-function': ['error', { max: 120, skipBlankLines: true, skipComments: true }] },
  },
  {
    // Node defines these three as accessors on the global object: each use is a generic global load and a getter
    // call, which optimised code cannot fold (perf: ~1 % of a fast `GET /me`). The module's own binding is a constant.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'Buffer', message: "Import it: import { Buffer } from 'node:buffer'." },
        { name: 'performance', message: "Import it: import { performance } from 'node:perf_hooks'." },
        { name: 'process', message: "Import it: import process from 'node:process'." },
      ],
    },
  },
  {
    // Every limit counts a client by its network (an IPv6 client's /64, a written port dropped): a surface that keyed on
    // `request.ip` would give an IPv6 client a fresh budget per address. http/server.ts reads it in one place.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='request'][property.name=/^ips?$/]",
          message: 'Count the client with clientNetwork(request) from http/server.ts.',
        },
      ],
    },
  },
  ...layerRules(),
  {
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
