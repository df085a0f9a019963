// --workers / EDGEFORM_WORKERS (issue 34, docs/operations.md "Workers"): one process unless
// asked; `auto` is one per core; anything else is a usage error that names the setting.
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../server/config.js';

describe('--workers', () => {
  it('is 1 by default, a number when given, and one per core with auto (flag or environment)', () => {
    expect(resolveConfig({}, {}).workers).toBe(1);
    expect(resolveConfig({ workers: '3' }, {}).workers).toBe(3);
    expect(resolveConfig({}, { EDGEFORM_WORKERS: '2' }).workers).toBe(2);
    expect(resolveConfig({ workers: 'auto' }, {}).workers).toBe(os.availableParallelism());
    expect(resolveConfig({}, { EDGEFORM_WORKERS: 'auto' }).workers).toBe(os.availableParallelism());
    // The flag wins over the environment.
    expect(resolveConfig({ workers: '1' }, { EDGEFORM_WORKERS: 'auto' }).workers).toBe(1);
  });

  it('refuses what is not a count or auto, naming the setting', () => {
    for (const bad of ['0', 'many', '-2', '2000']) expect(() => resolveConfig({ workers: bad }, {})).toThrow(/--workers \/ EDGEFORM_WORKERS/);
  });
});
