import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Every test file starts its own servers on ephemeral ports over its own database (file or schema).
    fileParallelism: true,
  },
});
