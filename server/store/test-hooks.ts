// TEST ONLY: failure injection for the consistency tests (test/e2e/consistency.test.ts).
// EDGEFORM_TEST_FAIL_AFTER_INSERT=<type>:<ms> makes every create of that type (the API's
// name: ip_policy, https_edge_route, ...) hold its write transaction open <ms> milliseconds
// after inserting the row, then fail (500) so the transaction rolls back. The variable is
// read only when set and is not a supported setting: never set it outside a test.
const VARIABLE = 'EDGEFORM_TEST_FAIL_AFTER_INSERT';

export async function failAfterInsertForTests(type: string): Promise<void> {
  const spec = process.env[VARIABLE];
  if (!spec) return;
  const [want, ms] = spec.split(':');
  if (want !== type) return;
  await new Promise((resolve) => setTimeout(resolve, Number(ms) || 0));
  throw new Error(`${VARIABLE}: injected failure after inserting ${type}`);
}
