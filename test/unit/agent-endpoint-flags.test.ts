// Issue 36: `edgeform agent`'s --url, --binding and --pooling-enabled (and their --config
// fields) become the tunnel's hostname, port, bindings and pooling; what cannot be meant is a
// usage error naming the flag.
import { describe, expect, it } from 'vitest';
import { ConfigError, resolveAgentConfig } from '../../agent/config.js';

const base = { authtoken: 'tok', apiUrl: 'http://127.0.0.1:1' };
const one = (flags: Record<string, unknown>, type: string, addr = '3000') => resolveAgentConfig({ ...base, ...flags } as never, { proto: type, addr }, {}).tunnels[0];
const refused = (flags: Record<string, unknown>, type?: string) => {
  try {
    resolveAgentConfig({ ...base, ...flags } as never, { proto: type, addr: type ? '3000' : undefined }, {});
  } catch (e) {
    if (e instanceof ConfigError) return e.message;
    throw e;
  }
  return 'accepted';
};

describe('edgeform agent --url, --binding, --pooling-enabled', () => {
  it('an internal pooled endpoint: the URL\'s name, its binding and pooling; the URL\'s scheme is the endpoint\'s', () => {
    expect(one({ url: 'https://API.internal', binding: 'internal', poolingEnabled: true }, 'http')).toMatchObject({ proto: 'https', hostname: 'api.internal', bindings: ['internal'], pooling_enabled: true, forwards_to: 'http://localhost:3000' });
    expect(one({ url: 'tcp://db.internal:5432' }, 'tcp', '5432')).toMatchObject({ proto: 'tcp', hostname: 'db.internal', port: 5432 });
    expect(one({}, 'http')).not.toHaveProperty('bindings');
  });

  it('refuses what cannot be meant, naming it', () => {
    expect(refused({ url: 'tls://x.internal' }, 'http')).toMatch(/url "tls:\/\/x.internal" is not a http URL/);
    expect(refused({ url: 'https://x.internal:8443' }, 'https')).toMatch(/only a tcp URL names a port/);
    expect(refused({ url: 'https://x.internal/path' }, 'https')).toMatch(/is not scheme:\/\/host\[:port\]/);
    expect(refused({ binding: 'internal' })).toMatch(/--url, --binding and --pooling-enabled are for an endpoint/);
    expect(refused({ binding: 'kubernetes' }, 'http')).toMatch(/binding "kubernetes" is not public or internal/);
  });
});
