// `edgeform validate`: every problem that can be found offline is reported with the file
// and line it concerns, all of them in one run, exit 1; valid manifests exit 0. No server:
// validate must not need one.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { manifestDir, runCli } from '../helpers/cli.js';
import { QUICKSTART } from '../helpers/reconciler.js';

const POLICY = 'kind: IPPolicy\nname: office\nrules:\n  - {cidr: 10.0.0.0/8, action: allow}\n';
const BACKEND = 'kind: HTTPResponseBackend\nname: hello\nbody: hi\n';

/** Each manifest has one problem, at `line`; `message` is what the user reads about it. */
const cases: Array<{ case: string; yaml: string; line: number; message: RegExp }> = [
  { case: 'an unknown kind', yaml: 'kind: IPPolicies\nname: x\n', line: 1, message: /unknown kind "IPPolicies" \(did you mean IPPolicy\?\); one of .*IPPolicy/ },
  { case: 'a mistyped kind, lower case', yaml: 'kind: httpsedge\nname: x\n', line: 1, message: /unknown kind "httpsedge" \(did you mean HTTPSEdge\?\)/ },
  { case: 'a mistyped field', yaml: 'kind: IPPolicy\nname: x\ndescripton: d\n', line: 3, message: /descripton: unknown field \(did you mean description\?\); IPPolicy takes description/ },
  { case: 'a mistyped field in a route', yaml: `${BACKEND}---\nkind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    user_agent_filtr: {deny: [curl]}\n`, line: 10, message: /routes\[0\]\.user_agent_filtr: unknown field \(did you mean user_agent_filter\?\)/ },
  { case: 'a mistyped reference name', yaml: `${POLICY}---\nkind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    ip_restriction: {ip_policy_ids: [IPPolicy/ofice]}\n`, line: 11, message: /IPPolicy\/ofice is not declared in these manifests \(did you mean office\?\)/ },
  { case: 'an unknown field', yaml: 'kind: IPPolicy\nname: x\ndescription: d\ncolour: red\n', line: 4, message: /colour: unknown field; IPPolicy takes description, metadata, rules/ },
  { case: 'an unknown field in a route module', yaml: `${BACKEND}---\nkind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    backend:\n      backend_id: HTTPResponseBackend/hello\n      weight: 3\n`, line: 12, message: /routes\[0\]\.backend\.weight: unknown field/ },
  { case: 'a bad CIDR', yaml: 'kind: IPPolicy\nname: x\nrules:\n  - {cidr: 10.0.0.0/8, action: allow}\n  - cidr: 10.0.0.300/8\n    action: deny\n', line: 5, message: /rules\[1\]\.cidr: / },
  { case: 'a reference to an undeclared document', yaml: `${POLICY}---\nkind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    ip_restriction: {ip_policy_ids: [IPPolicy/office, IPPolicy/vpn]}\n`, line: 11, message: /IPPolicy\/vpn is not declared in these manifests/ },
  { case: 'a reference of the wrong kind', yaml: `${POLICY}---\nkind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    backend: {backend_id: IPPolicy/office}\n`, line: 11, message: /IPPolicy\/office cannot be referenced here; this field takes .*HTTPResponseBackend/ },
  { case: 'a name declared twice', yaml: `${POLICY}---\nkind: IPPolicy\nname: office\n`, line: 6, message: /IPPolicy\/office is declared twice \(also at .*:1\)/ },
  { case: 'a route match declared twice', yaml: 'kind: HTTPSEdge\nname: e\nroutes:\n  - {match_type: path_prefix, match: /api}\n  - {match_type: path_prefix, match: /www}\n  - match_type: exact_path\n    match: /api\n', line: 7, message: /match \/api is declared twice in HTTPSEdge\/e/ },
  { case: 'a hostport declared by two edges', yaml: 'kind: HTTPSEdge\nname: a\nhostports: [app.example.com:443]\n---\nkind: HTTPSEdge\nname: b\nhostports: [www.example.com:443, App.Example.com:443]\n', line: 7, message: /app\.example\.com:443 of HTTPSEdge\/b is also declared by HTTPSEdge\/a/i },
  { case: 'an unset environment variable', yaml: 'kind: EventDestination\nname: hook\ntarget:\n  http:\n    url: https://hooks.example.com/x\n    secret: ${env:EDGEFORM_TEST_UNSET}\n', line: 6, message: /environment variable EDGEFORM_TEST_UNSET is not set/ },
  { case: 'a missing name', yaml: 'kind: IPPolicy\ndescription: x\n', line: 1, message: /IPPolicy needs a name/ },
  { case: 'a YAML syntax error in the second document: its line, not the document\'s first', yaml: `${POLICY}---\nkind: IPPolicy\nname: vpn\ndescription: [oops\n`, line: 8, message: /YAML: Flow sequence/ },
  { case: 'an unclosed quote: the last line, not past the end of the file', yaml: 'kind: IPPolicy\nname: x\ndescription: "open\n\n', line: 3, message: /YAML: Missing closing "quote/ },
  // Merge keys are read as kubectl reads them: the merged route repeats /a, so it is a duplicate, not an unknown field "<<".
  { case: 'a route copied with a YAML merge key and no new match', yaml: 'kind: HTTPSEdge\nname: e\nroutes:\n  - &r {match_type: path_prefix, match: /a}\n  - <<: *r\n    description: copy\n', line: 5, message: /match \/a is declared twice in HTTPSEdge\/e/ },
  { case: 'a weight over 10000 under a reference key: named as written, not as an internal placeholder', yaml: `${BACKEND}---\nkind: WeightedBackend\nname: w\nbackends:\n  HTTPResponseBackend/hello: 20000\n`, line: 8, message: /backends\.HTTPResponseBackend\/hello: weights are 0\.\.10000/ },
  { case: 'a version YAML reads as a number', yaml: 'kind: HTTPSEdge\nname: e\ntls_termination:\n  min_version: 1.2\n', line: 4, message: /tls_termination\.min_version: .*; YAML reads 1\.2 as a number: quote it to give text/ },
  { case: 'a label value YAML reads as a number', yaml: 'kind: TunnelGroupBackend\nname: t\nlabels: {port: 8080}\n', line: 3, message: /labels\.port: .*YAML reads 8080 as a number: quote it/ },
  { case: 'mutual_tls on a TLS edge that terminates at the agent (checked nowhere)', yaml: 'kind: TLSEdge\nname: t\ntls_termination: {terminate_at: agent}\nmutual_tls: {certificate_authority_ids: [ca_2kTvl0j2ItBlrBYOTmhU3lnVGxk]}\n', line: 4, message: /mutual_tls: mutual_tls needs the edge to terminate TLS, but tls_termination\.terminate_at is agent/ },
  { case: 'a nested parent field', yaml: 'kind: IPPolicy\nname: x\nrules:\n  - {cidr: 10.0.0.0/8, action: allow, ip_policy_id: ipp_123}\n', line: 4, message: /leave ip_policy_id out/ },
];

const validate = (dir: string, extra: string[] = []) => runCli(['validate', '-f', dir, ...extra], { EDGEFORM_TEST_UNSET: undefined });

describe('edgeform validate', () => {
  it.each(cases)('reports $case with file:line, exit 1', async ({ yaml, line, message }) => {
    const dir = manifestDir({ 'stack.yaml': yaml });
    const r = await validate(dir);
    expect(r.code).toBe(1);
    const problems = r.stderr.split('\n').filter((l) => l.includes('stack.yaml'));
    expect(problems, r.stderr).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${path.join(dir, 'stack.yaml').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${line}: `));
    expect(problems[0]).toMatch(message);
    expect(r.stderr).toContain('1 problem found.');
  });

  it('reports every problem of every file in one run, and --json lists them with file and line', async () => {
    // Names made distinct per case, so that the cases do not collide with each other.
    const own = (yaml: string, i: number) => yaml.replace(/(name: |[A-Z][A-Za-z]+\/)([a-z]+)\b/g, `$1$2-${i}`).replace(/example\.com/gi, `example${i}.com`);
    const dir = manifestDir(Object.fromEntries(cases.map((c, i) => [`case-${String(i).padStart(2, '0')}.yaml`, own(c.yaml, i)])));
    const r = await validate(dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${cases.length} problems found.`);
    const json = await validate(dir, ['--json']);
    expect(json.code).toBe(1);
    const doc = json.json();
    expect(doc.valid).toBe(false);
    const where = (p: { file: string; line: number }) => `${path.basename(p.file)}:${p.line}`;
    expect(doc.problems.map(where).sort()).toEqual(cases.map((c, i) => `case-${String(i).padStart(2, '0')}.yaml:${c.line}`).sort());
  });

  it('checks the rest of a document that has a bad reference: both problems in one run', async () => {
    const dir = manifestDir({ 'stack.yaml': 'kind: WeightedBackend\nname: w\nbackends:\n  HTTPResponseBackend/missing: 1\n  bkdtg_2abcdefghijklmnopqrstuvwxyz: 20000\n' });
    const r = await validate(dir);
    expect(r.stderr).toMatch(/stack\.yaml:4: backends\.HTTPResponseBackend\/missing: HTTPResponseBackend\/missing is not declared/);
    expect(r.stderr).toMatch(/stack\.yaml:5: backends\.bkdtg_2abcdefghijklmnopqrstuvwxyz: weights are 0\.\.10000/);
    expect(r.stderr).toContain('2 problems found.');
  });

  it('accepts valid manifests, exit 0: the quick start, and references by raw id', async () => {
    const ok = await runCli(['validate', '-f', QUICKSTART], { GH_SECRET: 'x' });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toBe('Success! 3 documents valid.\n');
    const raw = manifestDir({ 'a.yaml': 'kind: HTTPSEdge\nname: e\nroutes:\n  - match_type: path_prefix\n    match: /\n    backend: {backend_id: bkdhr_2abcdefghijklmnopqrstuvwxyz}\n' });
    const r = await runCli(['validate', '-f', raw, '--json']);
    expect(r.code, r.stdout).toBe(0);
    expect(r.json()).toEqual({ valid: true, documents: 1, problems: [] });
    const merged = manifestDir({ 'a.yaml': 'kind: HTTPSEdge\nname: e\nroutes:\n  - &r\n    match_type: path_prefix\n    match: /a\n    compression: &on {enabled: true}\n  - <<: *r\n    match: /b\n  - {match_type: exact_path, match: /c, compression: *on}\n' });
    const m = await runCli(['validate', '-f', merged]);
    expect(m.code, m.stderr).toBe(0);
  });
});
