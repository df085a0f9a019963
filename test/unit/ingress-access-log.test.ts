// The ingress's access-log line (server/ingress/http/access-log.ts) and the API's request
// line (requestLogLine, server/log-lines.ts) are made as text, not by JSON.stringify: every
// field must still come back from JSON.parse as it went in, whatever a client put in its
// method, host or path.
import { describe, expect, it } from 'vitest';
import { accessLogLine, type AccessLogFields } from '../../server/ingress/http/access-log.js';
import { jsonString, logLine, millis, requestLogLine } from '../../server/log-lines.js';

const plain: AccessLogFields = {
  edge: 'edghts_2abc', route: 'edghtsrt_2def', method: 'GET', host: 'app.example.com', port: 443, path: '/api/v1',
  status: 200, duration_ms: 0.125, bytes: 20, client_ip: '127.0.0.1', code: undefined,
};

const HOSTILE = [
  ['a double quote that would end the string', 'a"b'],
  ['a backslash and an escaped quote', 'a\\"},"status":999,"x":"'],
  ['a line break that would split the line in two', 'a\n{"msg":"forged"}'],
  ['carriage return, tab and NUL', 'a\r\t\u0000b'],
  ['every control character', Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('')],
  ['DEL and C1 controls', '\u007f\u0085\u009f'],
  ['a lone high surrogate', 'a\ud800b'],
  ['a lone low surrogate at the end', 'ab\udfff'],
  ['a surrogate pair (an emoji)', 'a\u{1F600}b'],
  ['line and paragraph separators', 'a\u2028b\u2029c'],
  ['non-ASCII letters', '/caf\u00e9/\u65e5\u672c'],
  ['an HTML closing tag', '</script><script>alert(1)</script>'],
  ['a JSON-looking path', '/{"a":[1,2]}'],
  ['the empty string', ''],
] as const;

describe('accessLogLine', () => {
  it('is the line logLine makes of the same fields, in the same order', () => {
    const line = accessLogLine(plain);
    const parsed = JSON.parse(line);
    const expected = JSON.parse(logLine({ level: 'info', msg: 'ingress request', ...plain }));
    expect(parsed.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Object.keys(parsed)).toEqual(Object.keys(expected));
    expect({ ...parsed, time: '' }).toEqual({ ...expected, time: '' });
  });

  it('leaves out an absent edge, route, status and code, as JSON.stringify leaves out undefined', () => {
    const parsed = JSON.parse(accessLogLine({ ...plain, edge: '', route: '', status: undefined, code: undefined }));
    expect(parsed).not.toHaveProperty('edge');
    expect(parsed).not.toHaveProperty('route');
    expect(parsed).not.toHaveProperty('status');
    expect(parsed).not.toHaveProperty('code');
    expect(parsed).toMatchObject({ msg: 'ingress request', host: plain.host, path: plain.path });
  });

  it.each(HOSTILE)('round-trips %s in every string field, on one line', (_why, value) => {
    const fields: AccessLogFields = { edge: `e${value}`, route: `r${value}`, method: value, host: value, port: 443, path: value, status: 404, duration_ms: 1.5, bytes: 0, client_ip: value, code: value };
    const line = accessLogLine(fields);
    expect(line).not.toMatch(/[\n\r]/);
    const parsed = JSON.parse(line);
    expect(parsed).toMatchObject({ edge: fields.edge, route: fields.route, method: value, host: value, path: value, client_ip: value, code: value, status: 404, port: 443, bytes: 0, duration_ms: 1.5 });
    // Exactly the fields of the line: nothing a value smuggled in.
    expect(Object.keys(parsed)).toEqual(['time', 'level', 'msg', 'edge', 'route', 'method', 'host', 'port', 'path', 'status', 'duration_ms', 'bytes', 'client_ip', 'code']);
  });

  it.each(HOSTILE)('jsonString writes %s as JSON.stringify does', (_why, value) => {
    expect(jsonString(value)).toBe(JSON.stringify(value));
  });

  it.each([0, 0.0004, 0.0005, 0.001, 0.05, 1.05, 1.5, 2, 12.3456, 999.9995, 12345.678, 3_000_000.25])('writes a duration of %s ms as Math.round(ms * 1000) / 1000', (ms) => {
    const line = accessLogLine({ ...plain, duration_ms: ms });
    expect(JSON.parse(line).duration_ms).toBe(Math.round(ms * 1000) / 1000);
    expect(JSON.parse(millis(ms))).toBe(Math.round(ms * 1000) / 1000);
  });

  it('writes a number JSON cannot hold as null, as JSON.stringify does', () => {
    expect(JSON.parse(accessLogLine({ ...plain, duration_ms: Number.NaN })).duration_ms).toBeNull();
  });
});

describe('the API request line', () => {
  it('is the line logLine makes of the same fields, in the same order', () => {
    const line = requestLogLine('info', 'GET', '/ip_policies/ipp_1', 200, 1.25, 'op_1');
    const parsed = JSON.parse(line);
    const generic = JSON.parse(logLine({ level: 'info', method: 'GET', path: '/ip_policies/ipp_1', status: 200, duration_ms: 1.25, operation_id: 'op_1' }));
    expect(parsed).toEqual({ ...generic, time: parsed.time });
    expect(Object.keys(parsed)).toEqual(Object.keys(generic));
    expect(JSON.parse(requestLogLine('error', 'POST', '/x', 500, 0.0004, 'op_2'))).toMatchObject({ level: 'error', status: 500, duration_ms: 0 });
  });

  it.each(HOSTILE)('round-trips %s as method and path, on one line', (_why, value) => {
    const line = requestLogLine('info', value, value, 404, 3, 'op_1');
    expect(line).not.toMatch(/[\n\r]/);
    const parsed = JSON.parse(line);
    expect(parsed).toMatchObject({ method: value, path: value, status: 404, duration_ms: 3, operation_id: 'op_1' });
    expect(Object.keys(parsed)).toEqual(['time', 'level', 'method', 'path', 'status', 'duration_ms', 'operation_id']);
  });
});
