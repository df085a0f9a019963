// The worker thread of saml-verify.ts: parses a POSTed SAMLResponse and checks its signatures
// with @node-saml/node-saml, off the event loop. Plain JavaScript, so Node runs it with no
// loader. One task at a time; its answer is structured-cloneable (the profile's fields and the
// assertion's ID and times, not node-saml's functions).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { SAML, SamlStatusError } from '@node-saml/node-saml';

/**
 * Whether `id` is an AuthnRequest ID the route made, and when: the same check as requestIds in
 * saml.ts (`_<time hex><mac>`, the mac an HMAC of the route id and the time), which makes them.
 */
function madeAt(id, routeId, key) {
  const m = /^_([0-9a-f]{8,12})([0-9a-f]{32})$/.exec(id);
  if (!m) return undefined;
  const mac = createHmac('sha256', key).update(`${routeId}.${m[1]}`).digest('hex').slice(0, 32);
  return timingSafeEqual(Buffer.from(mac), Buffer.from(m[2])) ? parseInt(m[1], 16) : undefined;
}

parentPort.on('message', async ({ id, options, response, routeId, idKey }) => {
  const key = Buffer.from(idKey, 'hex');
  const cacheProvider = {
    saveAsync: async (_k, value) => ({ value, createdAt: Date.now() }),
    getAsync: async (requestId) => {
      const t = madeAt(requestId, routeId, key);
      return t === undefined ? null : new Date(t).toISOString();
    },
    removeAsync: async (k) => k,
  };
  try {
    const { profile } = await new SAML({ ...options, cacheProvider }).validatePostResponseAsync({ SAMLResponse: response });
    if (!profile) return parentPort.postMessage({ id, profile: null });
    const fields = {};
    for (const [k, v] of Object.entries(profile)) if (typeof v !== 'function') fields[k] = v;
    const a = profile.getAssertion?.()?.Assertion;
    const assertion = a ? { ID: a.$?.ID, IssueInstant: a.$?.IssueInstant, NotOnOrAfter: a.Conditions?.[0]?.$?.NotOnOrAfter } : undefined;
    parentPort.postMessage({ id, profile: JSON.parse(JSON.stringify(fields)), assertion });
  } catch (e) {
    parentPort.postMessage({ id, error: { message: String(e?.message ?? e), status: e instanceof SamlStatusError } });
  }
});
