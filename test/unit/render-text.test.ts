// The text renderer on multi-line strings changed in place: the lines that change, as a
// heredoc, where the first line and a line count showed nothing of what changed.
import jsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { plain, renderChange } from '../../reconciler/render/text.js';
import type { Change } from '../../reconciler/plan/types.js';

const update = (field: string, before: unknown, after: unknown): Change => {
  const b = { [field]: before };
  const a = { [field]: after };
  return { address: 'HTTPResponseBackend/b', kind: 'HTTPResponseBackend', name: 'b', actions: ['update'], before: b, after: a, patch: jsonPatch.compare(b, a), operations: [], id: 'bkdhr_1' };
};
const body = (change: Change) => renderChange(change, plain).slice(2).join('\n');
const policy = (capacity: number) => `on_http_request:\n  - actions:\n      - type: rate-limit\n        config:\n          name: per-ip\n          algorithm: sliding_window\n          capacity: ${capacity}\n          rate: 60s\n          bucket_key: [conn.client_ip]\n`;

describe('text renderer: multi-line strings changed in place', () => {
  it.each([
    {
      reason: 'one line of a traffic policy changed: that line, two lines of context, the rest hidden',
      change: update('value', policy(100), policy(200)),
      want: ['      ~ value = <<-EOT', '            # (4 unchanged lines hidden)', '                      name: per-ip', '                      algorithm: sliding_window', '          -           capacity: 100', '          +           capacity: 200', '                      rate: 60s', '                      bucket_key: [conn.client_ip]', '        EOT'],
    },
    {
      reason: 'a one-line value becoming several lines',
      change: update('body', 'down', 'down for\nmaintenance\n'),
      want: ['      ~ body = <<-EOT', '          - down', '          + down for', '          + maintenance', '        EOT'],
    },
  ])('$reason', ({ change, want }) => {
    expect(body(change)).toBe(want.join('\n'));
  });

  it('one-line values keep the one-line form', () => {
    expect(body(update('body', 'a', 'b'))).toBe('      ~ body = "a" -> "b"');
  });
});
