// Is an address inside a CIDR: both as big integers, compared under the prefix's mask.
import net from 'node:net';
import { ipToBigInt } from '../../provider/catalog/validate/cidr.js';

export interface Cidr { text: string; version: 4 | 6; network: bigint; mask: bigint }

export function toCidr(text: string): Cidr {
  const [addr, len] = text.split('/');
  const version = net.isIPv4(addr) ? 4 : 6;
  const bits = version === 4 ? 32 : 128;
  const mask = ((1n << BigInt(bits)) - 1n) ^ ((1n << BigInt(bits - Number(len))) - 1n);
  return { text, version, network: ipToBigInt(addr, version), mask };
}

/** The first CIDR holding `ip` (IPv4-mapped IPv6 addresses count as IPv4), or undefined. */
export function matchCidr(ip: string, cidrs: readonly Cidr[]): Cidr | undefined {
  let addr = ip;
  if (/^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(addr)) addr = addr.slice(7);
  const version = net.isIPv4(addr) ? 4 : net.isIPv6(addr) ? 6 : 0;
  if (version === 0) return undefined;
  const value = ipToBigInt(addr, version);
  return cidrs.find((c) => c.version === version && (value & c.mask) === c.network);
}
