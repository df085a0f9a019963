// Mistakes that used to go silent: an agent's bare-port --forwards-to, a malformed database URL.
import { describe, expect, it } from 'vitest';
import { ConfigError, forwardsTarget, resolveAgentConfig } from '../../agent/config.js';
import { providerOf } from '../../server/store/db.js';

describe('edgeform agent --forwards-to', () => {
  const flags = (forwardsTo: string) => resolveAgentConfig({ authtoken: 'tok', apiUrl: 'http://127.0.0.1:1', label: ['app=web'], forwardsTo } as never, {}, {});

  it('a bare port is localhost\'s, as for an ephemeral tunnel (it was dialled as 0.0.11.184:80)', () => {
    expect(flags('3000').tunnels[0].forwards_to).toBe('localhost:3000');
    expect(forwardsTarget('8080', 'x')).toBe('localhost:8080');
  });

  it('host:port and URLs are kept as written', () => {
    for (const v of ['localhost:3000', '127.0.0.1:3000', '[::1]:3000', 'app.internal:8080', 'http://localhost:3000', 'https://api.example.com']) expect(forwardsTarget(v, 'x')).toBe(v);
  });

  it('a host the resolver would read as another address is refused, naming the forms', () => {
    for (const v of ['3000:80', '127.1:80', '0x7f000001:80']) {
      expect(() => flags(v)).toThrow(ConfigError);
      expect(() => flags(v)).toThrow(/--forwards-to: .*write host:port \(e\.g\. localhost:3000\) or a bare port/);
    }
  });
});

describe('the database URL', () => {
  it('postgres:/ with one slash, or another scheme, is refused naming the forms accepted, the password hidden', () => {
    for (const url of ['postgres:/u:secret@localhost/db', 'postgresql:u@localhost/db', 'mysql://u@localhost/db', 'sqlite:data/x.db']) {
      expect(() => providerOf(url)).toThrow(/use file:<path> \(or a plain path\) for SQLite, or postgresql:\/\/user@host:port\/db/);
    }
    expect(() => providerOf('postgres:/u:secret@localhost/db')).not.toThrow(/secret/);
  });

  it('file:, a plain path and postgres(ql):// are accepted', () => {
    expect(providerOf('file:data/x.db')).toBe('sqlite');
    expect(providerOf('data/x.db')).toBe('sqlite');
    expect(providerOf('/var/lib/edgeform/x.db')).toBe('sqlite');
    expect(providerOf('postgresql://u@localhost:5432/db')).toBe('postgresql');
    expect(providerOf('postgres://u@localhost/db')).toBe('postgresql');
  });
});
