import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores here; more workers only contend.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
