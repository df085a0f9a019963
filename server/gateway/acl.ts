// A credential's acl, checked when a tunnel binds. Rules are `bind:<what>`:
//   bind:k=v        allows the label k=v; a labeled tunnel binds only when every one of
//                   its labels is allowed (a rule for one label does not cover the others)
//   bind:host       an ephemeral tunnel on exactly this hostname
//   bind:*.domain   an ephemeral tunnel on any hostname under domain
//   bind:*          anything
// An empty acl allows everything. Rules that are not bind rules are ignored here.
import type { TunnelConfig } from '../../agent/protocol.js';

export function bindAllowed(acl: string[], tunnel: Pick<TunnelConfig, 'labels'>, hostname?: string): boolean {
  const rules = acl.filter((r) => r.startsWith('bind:')).map((r) => r.slice(5));
  if (!acl.length) return true;
  if (rules.includes('*')) return true;
  if (tunnel.labels) {
    const pairs = Object.entries(tunnel.labels).map(([k, v]) => `${k}=${v}`);
    return pairs.length > 0 && pairs.every((p) => rules.includes(p));
  }
  if (!hostname) return false;
  const host = hostname.toLowerCase();
  return rules.some((r) => {
    const rule = r.toLowerCase();
    if (rule.includes('=')) return false;
    if (rule.startsWith('*.')) return host.endsWith(rule.slice(1)) && host.length > rule.length - 1;
    return host === rule;
  });
}

/** The sentence an agent sees when a bind is refused. */
export function refusal(acl: string[], tunnel: Pick<TunnelConfig, 'labels' | 'name'>, hostname?: string): string {
  const rules = acl.filter((r) => r.startsWith('bind:')).map((r) => r.slice(5));
  const what = tunnel.labels
    ? `labels ${Object.entries(tunnel.labels).map(([k, v]) => `${k}=${v}`).filter((p) => !rules.includes(p)).join(',')}`
    : `hostname ${hostname}`;
  return `tunnel "${tunnel.name}": the credential's acl (${acl.join(', ')}) does not allow binding ${what}; add a bind rule to the credential or use another one`;
}
