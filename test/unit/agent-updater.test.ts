// The agent's answer to an update offer, one case per reason (SPEC: never a new major version).
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { answerCommand } from '../../agent/session.js';
import { Updater } from '../../agent/updater.js';

const offer = (version: string) => ({ version, sha256: '0'.repeat(64), size: 1 });

describe('Updater.accept', () => {
  it.each([
    { reason: 'a newer build of the same major is accepted', running: '1.2.0', offered: '1.3.0', enabled: true, code: undefined },
    { reason: 'a newer patch is accepted', running: '1.2.0', offered: '1.2.1', enabled: true, code: undefined },
    { reason: 'a new major version is never taken', running: '1.9.9', offered: '2.0.0', enabled: true, code: 'ERR_SERVICE_322' },
    { reason: 'the same version is no update', running: '1.2.0', offered: '1.2.0', enabled: true, code: 'ERR_SERVICE_322' },
    { reason: 'an older build is no update', running: '1.2.0', offered: '1.1.0', enabled: true, code: 'ERR_SERVICE_322' },
    { reason: 'no build on the server is no update', running: '1.2.0', offered: undefined, enabled: true, code: 'ERR_SERVICE_322' },
    { reason: 'update checks disabled wins over everything', running: '1.2.0', offered: '1.3.0', enabled: false, code: 'ERR_SERVICE_323' },
  ])('$reason', ({ running, offered, enabled, code }) => {
    const u = new Updater(running, enabled, os.tmpdir(), () => {});
    expect(u.accept(offered ? offer(offered) : undefined)?.error_code).toBe(code);
  });

  it('a second offer while updating is 324', () => {
    const u = new Updater('1.0.0', true, os.tmpdir(), () => {});
    expect(u.accept(offer('1.0.1'))).toBeUndefined();
    expect(u.accept(offer('1.0.1'))?.error_code).toBe('ERR_SERVICE_324');
  });
});

describe('answerCommand', () => {
  const updater = new Updater('1.0.0', true, os.tmpdir(), () => {});
  it.each([
    { reason: 'stop is acknowledged, then the agent stops', action: 'stop', platform: 'linux', status: 200, then: 'stop', code: undefined },
    { reason: 'restart is acknowledged, then the agent restarts', action: 'restart', platform: 'linux', status: 200, then: 'restart', code: undefined },
    { reason: 'restart on Windows is refused: no exec there', action: 'restart', platform: 'win32', status: 409, then: undefined, code: 'ERR_SERVICE_329' },
    { reason: 'an unknown command is a 400', action: 'dance', platform: 'linux', status: 400, then: undefined, code: undefined },
  ] as const)('$reason', ({ action, platform, status, then, code }) => {
    const a = answerCommand({ action: action as 'stop' }, platform, updater);
    expect(a.status).toBe(status);
    expect(a.then).toBe(then);
    expect((a.body as { error_code?: string }).error_code).toBe(code);
  });
});
