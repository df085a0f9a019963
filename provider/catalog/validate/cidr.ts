// CIDR parsing for IP policy rules and SSH source-address options.
import net from 'node:net';

export type CidrResult = { ok: true; value: string; version: 4 | 6 } | { ok: false; message: string };

export function ipToBigInt(ip: string, version: 4 | 6): bigint {
  if (version === 4) return ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const parse = (s: string | undefined) => (s ? s.split(':') : []);
  let groups = parse(head);
  let rest = parse(tail);
  // An embedded IPv4 tail (::ffff:1.2.3.4) counts as two groups.
  const last = (tail === undefined ? groups : rest).at(-1);
  if (last?.includes('.')) {
    const v4 = ipToBigInt(last, 4);
    const pair = [(v4 >> 16n).toString(16), (v4 & 0xffffn).toString(16)];
    if (tail === undefined) groups = [...groups.slice(0, -1), ...pair];
    else rest = [...rest.slice(0, -1), ...pair];
  }
  const fill = tail === undefined ? [] : Array(8 - groups.length - rest.length).fill('0');
  return [...groups, ...fill, ...rest].reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** The text of an address: dotted IPv4, or RFC 5952 IPv6. */
export function bigIntToIp(n: bigint, version: 4 | 6): string {
  if (version === 4) return [24n, 16n, 8n, 0n].map((s) => ((n >> s) & 255n).toString()).join('.');
  const groups = Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn));
  // RFC 5952: compress the longest run (length >= 2) of zero groups, the first on ties.
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len && j - i >= 2) best = { at: i, len: j - i };
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.at < 0) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.len).join(':')}`;
}

/** An IPv6 address (without zone) in RFC 5952 form: `2001:0DB8:0:0::1` -> `2001:db8::1`. */
export const canonicalIpv6 = (addr: string) => bigIntToIp(ipToBigInt(addr, 6), 6);

/**
 * Parses `addr/len` (or a bare address, taken as a single host) into its canonical form.
 * Host bits set is an error whose message names the network address to use instead.
 */
export function parseCidr(input: string): CidrResult {
  const [addr, len, extra] = input.trim().split('/');
  if (extra !== undefined) return { ok: false, message: `"${input}" is not a CIDR: expected address/prefix-length` };
  // Node accepts an IPv6 zone (fe80::1%eth0); a zone names a local interface and has no place in a rule.
  if (addr.includes('%')) return { ok: false, message: `"${input}" is not a CIDR: an IPv6 zone (%...) names a local interface; leave it out` };
  const version = net.isIPv4(addr) ? 4 : net.isIPv6(addr) ? 6 : 0;
  if (version === 0) return { ok: false, message: `"${input}" is not a CIDR: "${addr}" is not an IPv4 or IPv6 address` };
  const bits = version === 4 ? 32 : 128;
  if (len !== undefined && !/^\d{1,3}$/.test(len)) {
    return { ok: false, message: `"${input}" is not a CIDR: prefix length "${len}" is not a number` };
  }
  const prefix = len === undefined ? bits : Number(len);
  if (prefix > bits) return { ok: false, message: `"${input}" is not a CIDR: prefix length must be 0..${bits} for IPv${version}` };
  const value = ipToBigInt(addr, version);
  const hostMask = (1n << BigInt(bits - prefix)) - 1n;
  const network = value & ~hostMask;
  const canonical = `${bigIntToIp(network, version)}/${prefix}`;
  if (network !== value) {
    return { ok: false, message: `"${input}" has host bits set; did you mean ${canonical}?` };
  }
  return { ok: true, value: canonical, version };
}
