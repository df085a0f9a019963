// `plan --format markdown`, the summary a pipeline posts on a pull request: counts, the
// changes made outside edgeform in their own section, one collapsible section per resource,
// write-only values masked, leftovers listed. Checked against its golden text (ids and the
// API-call count, which vary, normalised).
import { afterAll, expect, it } from 'vitest';
import { manifestDir } from '../helpers/cli.js';
import { stackRunner, toYaml } from '../helpers/reconciler.js';
import { startTestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';

afterAll(removeTempDirs);

const GOLDEN = `## edgeform plan for stack \`web\`

**Plan: 2 to add, 2 to change, 0 to destroy.**

| add | change | destroy | changed outside edgeform |
|---:|---:|---:|---:|
| 2 | 2 | 0 | 1 |

### Changed outside edgeform (1)

These differ from what edgeform last applied; the plan puts them back.

<details>
<summary><code>~</code> <b>IPPolicy/office</b> update (changed outside edgeform)</summary>

\`\`\`diff
   # IPPolicy/office will be updated in-place (changed outside edgeform since the last apply)
!   IPPolicy/office [id=ipp_ID]
!       description = "changed by hand" -> "office"
\`\`\`

</details>

### Changes (3)

<details>
<summary><code>+</code> <b>IPPolicy/lab</b> create</summary>

\`\`\`diff
   # IPPolicy/lab will be created
+   IPPolicy/lab
+       description = "lab <b>"
+       metadata    = ""
\`\`\`

</details>

<details>
<summary><code>+</code> <b>IPPolicy/lab.rules[&quot;10.1.0.0/16&quot;]</b> create</summary>

\`\`\`diff
   # IPPolicy/lab.rules["10.1.0.0/16"] will be created
+   IPPolicy/lab.rules["10.1.0.0/16"]
+       description = ""
+       cidr        = "10.1.0.0/16"
+       action      = "allow"
+       metadata    = ""
\`\`\`

</details>

<details>
<summary><code>~</code> <b>EventDestination/hook</b> update</summary>

\`\`\`diff
   # EventDestination/hook will be updated in-place
!   EventDestination/hook [id=ed_ID]
!       target.http.url = "https://hooks.example.com/in" -> "https://hooks.example.com/v2"
!       (sensitive value)
\`\`\`

</details>

### Managed but no longer declared (1)

Left alone without \`--prune\`:

- \`IPPolicy/old\`

<sub>N API calls · edgeform plan</sub>
`;

it('plan --format markdown matches its golden text and shows no secret', async () => {
  const s = await startTestServer();
  try {
    const r = stackRunner(s);
    const v1 = manifestDir({
      'a.yaml': toYaml([
        { kind: 'IPPolicy', name: 'office', description: 'office' },
        { kind: 'IPPolicy', name: 'old', description: 'old' },
        { kind: 'EventDestination', name: 'hook', target: { http: { url: 'https://hooks.example.com/in', secret: 'first-secret-value' } } },
      ]),
    });
    await r.apply(['-f', v1, '--stack', 'web']);
    const office = (await s.get('/ip_policies')).body.ip_policies.find((p: any) => p.description === 'office');
    expect((await s.patch(`/ip_policies/${office.id}`, { description: 'changed by hand' })).status).toBe(200);
    const v2 = manifestDir({
      'a.yaml': toYaml([
        { kind: 'IPPolicy', name: 'office', description: 'office' },
        { kind: 'IPPolicy', name: 'lab', description: 'lab <b>', rules: [{ cidr: '10.1.0.0/16', action: 'allow' }] },
        { kind: 'EventDestination', name: 'hook', target: { http: { url: 'https://hooks.example.com/v2', secret: 'second-secret-value' } } },
      ]),
    });
    const out = await r.run(['plan', '-f', v2, '--stack', 'web', '--format', 'markdown', '--detailed-exitcode']);
    expect(out.code, out.stderr).toBe(2);
    const normalised = out.stdout.replace(/\[id=(\w+?)_\w+\]/g, '[id=$1_ID]').replace(/<sub>\d+ API calls/, '<sub>N API calls');
    expect(normalised).toBe(GOLDEN);
    for (const text of r.outputs) expect(text).not.toMatch(/first-secret-value|second-secret-value/);
    expect(out.stdout).toContain(`[id=${office.id}]`);
    // No changes: one line, no sections.
    await r.apply(['-f', v2, '--stack', 'web']);
    const same = await r.run(['plan', '-f', v2, '--stack', 'web', '--format', 'markdown']);
    expect(same.code).toBe(0);
    expect(same.stdout).toContain('**No changes.** Live state matches the manifests.');
    expect(same.stdout).not.toContain('<details>');
    const bad = await r.run(['plan', '-f', v2, '--stack', 'web', '--format', 'yaml']);
    expect(bad.code).toBe(2);
  } finally {
    await s.close();
  }
}, 120_000);
