// Terraform's value encoding (cty) for DynamicValue: MessagePack with extensions for
// unknown values, and the JSON form of stored state. Values are plain JS values plus the
// `unknown` marker; `encode` conforms a value to its type (every object key present,
// unknowns as extension 0), which is what terraform checks first.
import { decode as msgpackDecode, encode as msgpackEncode, ExtData } from '@msgpack/msgpack';
import { parse as losslessParse } from 'lossless-json';

export type CtyType =
  | 'string'
  | 'number'
  | 'bool'
  | 'dynamic'
  | ['list', CtyType]
  | ['set', CtyType]
  | ['map', CtyType]
  | ['object', Record<string, CtyType>];

/** A value terraform does not know yet (decoded from any msgpack extension). */
export class Unknown {
  toJSON() {
    return '(known after apply)';
  }
}
export const unknown = new Unknown();
export const isUnknown = (v: unknown): v is Unknown => v instanceof Unknown;

/** Whether a value holds an unknown anywhere inside it. */
export function hasUnknown(v: unknown): boolean {
  if (isUnknown(v)) return true;
  if (Array.isArray(v)) return v.some(hasUnknown);
  if (v && typeof v === 'object') return Object.values(v).some(hasUnknown);
  return false;
}

function fromWire(v: unknown): unknown {
  if (v instanceof ExtData) return unknown;
  if (Array.isArray(v)) return v.map(fromWire);
  if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
  if (typeof v === 'bigint') return Number(v);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fromWire(x)]));
  return v;
}

/** Decodes a DynamicValue's msgpack bytes; absent or empty bytes read as null. */
export function decodeValue(bytes: Uint8Array | null | undefined): any {
  if (!bytes || bytes.length === 0) return null;
  return fromWire(msgpackDecode(bytes, { useBigInt64: true }));
}

const UNKNOWN_WIRE = new ExtData(0, Uint8Array.of(0));

/** A number as cty sends it: exact int64 or float64, else its decimal text. */
function toNumber(v: unknown): unknown {
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return /^-?\d+$/.test(v) && !Number.isSafeInteger(Number(v)) ? v : Number(v);
  return Number(v);
}

function conform(v: unknown, type: CtyType): unknown {
  if (isUnknown(v)) return UNKNOWN_WIRE;
  if (v === null || v === undefined) return null;
  if (type === 'string') return typeof v === 'string' ? v : String(v);
  if (type === 'number') return toNumber(v);
  if (type === 'bool') return Boolean(v);
  if (type === 'dynamic') throw new Error('dynamic values are not used by this provider');
  const [kind, inner] = type;
  if (kind === 'list' || kind === 'set') return (v as unknown[]).map((x) => conform(x, inner));
  if (kind === 'map') return Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, conform(x, inner)]));
  const obj = v as Record<string, unknown>;
  return Object.fromEntries(Object.entries(inner).map(([k, t]) => [k, conform(obj[k], t)]));
}

/** Encodes a value of the given type as a DynamicValue's msgpack bytes. */
export function encodeValue(v: unknown, type: CtyType): Uint8Array {
  return msgpackEncode(conform(v, type));
}

/** The type as terraform spells it in schemas (`["list","string"]`). */
export const typeJson = (type: CtyType) => Buffer.from(JSON.stringify(type));

/**
 * Parses stored state JSON (UpgradeResourceState) without losing digits: numbers too
 * large for a double stay decimal text, which cty accepts for numbers.
 */
export function parseStateJson(text: string): any {
  return losslessParse(text, undefined, (value: string) => {
    const n = Number(value);
    return /^-?\d+$/.test(value) && !Number.isSafeInteger(n) ? value : n;
  }) as unknown;
}
