// `edgeform policy test` with what an offline test lacked: a request body (--body,
// --body-file) and the upstream's answer (--upstream-status, --upstream-header,
// --upstream-body) for on_http_response, run on policies copied from the service's docs.
// The --json document keeps its keys; a forwarded request gains `client_response`.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { runCliProcess } from '../helpers/cli-process.js';

const DOCS = path.resolve(import.meta.dirname, '../fixtures/service-policies');
const doc = (name: string) => path.join(DOCS, `${name}.yml`);
const edgeform = (...args: string[]) => runCliProcess(['policy', 'test', ...args], {}, { timeoutMs: 60_000 });

const BREAKER = `on_http_request:
  - actions:
      - type: circuit-breaker
        config: {error_threshold: 0.5, volume_threshold: 2, window_duration: 10s, tripped_duration: 30s}
`;
const BAD_TEMPLATE = `on_http_request:
  - actions:
      - type: custom-response
        config:
          status_code: 200
          body: "hello \${req.url.pth} and \${conn.client_ip}"
`;
const dir = manifestDir({ 'breaker.yaml': BREAKER, 'bad-template.yaml': BAD_TEMPLATE, 'body.json': '{"api_key": "sk_1", "to": "ana@example.com"}' });

describe('edgeform policy test with bodies and an upstream answer', () => {
  it('--body: request-body-find-replace shows the body sent upstream', async () => {
    const r = await edgeform(doc('actions_request-body-find-replace-2'), '--request', 'POST https://app.example.com/api', '--body-file', path.join(dir, 'body.json'), '--json');
    expect(r.code, r.stderr).toBe(0);
    const run = r.json().requests[0];
    expect(run.result).toBe('forwarded');
    expect(run.phases.on_http_request.mutations.request.body).toBe('{"api_key": "[REDACTED]", "to": "[EMAIL REDACTED]"}');
  });

  it('--upstream-body and --upstream-header: response-body-find-replace and the client_response the client gets', async () => {
    const r = await edgeform(doc('actions_response-body-find-replace-2'), '--request', 'GET https://app.example.com/', '--upstream-status', '200', '--upstream-header', 'Content-Type: text/plain', '--upstream-body', 'card 4111-1111-1111-1111', '--json');
    expect(r.code, r.stderr).toBe(0);
    const run = r.json().requests[0];
    expect(run.result).toBe('forwarded');
    expect(run.client_response).toEqual({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'card [CARD REDACTED]' });
    const text = await edgeform(doc('actions_response-body-find-replace-2'), '--request', 'GET https://app.example.com/', '--upstream-body', 'ssn 123-45-6789');
    expect(text.stdout).toContain("(on the upstream's 200 given with --upstream-*)");
    expect(text.stdout).toContain('Result: forwarded upstream; the client gets 200');
    expect(text.stdout).toContain('body: "ssn [SSN REDACTED]"');
  });

  it('compress-response: the encoding the client would get', async () => {
    const r = await edgeform(doc('actions_compress-response_examples_compressing-api-responses-based-on-url-path-0'), '--request', 'GET https://app.example.com/api/items', '-H', 'Accept-Encoding: br;q=0.5, gzip', '--upstream-header', 'Content-Type: application/json', '--upstream-body', '{"a":1}');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('compress-response: gzip');
    expect(r.stdout).toContain('content-encoding: gzip');
  });

  it('--upstream-status 502 with --repeat: the circuit breaker counts the errors and trips', async () => {
    const r = await edgeform(path.join(dir, 'breaker.yaml'), '--request', 'GET https://app.example.com/', '--upstream-status', '502', '--repeat', '4', '--json');
    expect(r.code, r.stderr).toBe(0);
    const results = r.json().requests.map((x: { result: string; response?: { status: number } }) => x.response?.status ?? x.result);
    expect(results).toEqual(['forwarded', 'forwarded', 503, 503]);
  });

  it('an interpolation that does not compile names the field, the column and the line', async () => {
    const r = await edgeform(path.join(dir, 'bad-template.yaml'), '--request', 'GET https://app.example.com/');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('bad-template.yaml:6: on_http_request[0].actions[0].config.body column 17: unknown variable req.url.pth in on_http_request');
  });

  it('refuses --body without --request, and both --body and --body-file', async () => {
    expect((await edgeform(doc('actions_request-body-find-replace-2'), '--body', 'x')).stderr).toContain('--body needs --request');
    const both = await edgeform(doc('actions_request-body-find-replace-2'), '--request', 'POST https://app.example.com/', '--body', 'x', '--body-file', path.join(dir, 'body.json'));
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give --body or --body-file, not both');
  });
});
