// One IP policy's rules as the routing table holds them: compact (typed arrays, no object per
// rule), answered by binary search, and changed one rule at a time without a rebuild.
//
// Each rule is a range [start, end] of addresses (IPv4 as numbers in Uint32Arrays, IPv6 as
// bigints), sorted by start (the wider of two equal starts first). CIDR ranges never partly
// overlap, so the ranges holding an address are a chain of nested ones: the last range that
// starts at or before the address, then its enclosing ranges (parent links, computed once per
// build). A rule's id is kept as two 32-bit hashes, enough to find it again when it is deleted.
// Rules added since the last build sit in a short list beside the sorted ranges (scanned
// linearly), removed ones are marked dead; past OVERLAY_MAX of either the set is rebuilt, by
// merging, not re-sorting, the sorted part (linear). Sets are immutable: a change returns a new
// set, sharing the large arrays with the old one, so a request holding the old table sees the
// old rules.
import net from 'node:net';
import { ipToBigInt } from '../../provider/catalog/validate/cidr.js';

export type IpAction = 'allow' | 'deny';

/** One rule as stored: its id, CIDR and action. */
export interface IpRuleInput { id: string; cidr: string; action: IpAction }

type Key = number | bigint;

/** The sorted part of one address family: ranges, their actions and enclosing ranges, id hashes. */
interface Sorted<K extends Key> {
  n: number;
  starts: ArrayLike<K> & { [i: number]: K };
  ends: ArrayLike<K> & { [i: number]: K };
  /** 1: deny, 0: allow. */
  deny: Uint8Array;
  /** The nearest enclosing range, or -1. */
  parent: Int32Array;
  h1: Int32Array;
  h2: Int32Array;
  /** 1 while the rule exists (a removed rule is marked 0 until the next build). */
  alive: Uint8Array;
  dead: number;
}

interface Loose<K extends Key> { start: K; end: K; deny: boolean; h1: number; h2: number }

/** Rules added since the last build, or removed ones marked dead, past which the set is rebuilt. */
export const OVERLAY_MAX = 1024;

/** Two independent 32-bit FNV-1a hashes of an id (a rule is found again by both). */
export function idHashes(id: string): [number, number] {
  hashRange(id, 0, id.length);
  return [H1, H2];
}

/** The hashes of text[from, to) (idHashes of that id), left in H1 and H2: no array per rule while a million are read. */
let H1 = 0;
let H2 = 0;
function hashRange(text: string, from: number, to: number) {
  let a = 0x811c9dc5 | 0;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995) ^ (b >>> 13);
  }
  H1 = a | 0;
  H2 = b | 0;
}

/** An IPv4-mapped IPv6 rule (::ffff:10.0.0.0/104) also covers the IPv4 addresses it maps: a dual-stack listener reports a client either way. */
function rangesOf(cidr: string): { v4?: [number, number]; v6?: [bigint, bigint] } {
  const slash = cidr.indexOf('/');
  const addr = slash < 0 ? cidr : cidr.slice(0, slash);
  if (net.isIPv4(addr)) {
    const len = slash < 0 ? 32 : Number(cidr.slice(slash + 1));
    const start = v4Number(addr);
    const size = 2 ** (32 - len);
    const s = start - (start % size);
    return { v4: [s, s + size - 1] };
  }
  const len = slash < 0 ? 128 : Number(cidr.slice(slash + 1));
  const value = ipToBigInt(addr, 6);
  const host = (1n << BigInt(128 - len)) - 1n;
  const s = value & ~host & ((1n << 128n) - 1n);
  const out: { v4?: [number, number]; v6?: [bigint, bigint] } = { v6: [s, s | host] };
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  if (mapped && len >= 96) {
    const start = v4Number(mapped[1]);
    const size = 2 ** (128 - len);
    const s4 = start - (start % size);
    out.v4 = [s4, s4 + size - 1];
  }
  return out;
}

function v4Number(addr: string): number {
  let n = 0;
  let part = 0;
  for (let i = 0; i < addr.length; i++) {
    const c = addr.charCodeAt(i);
    if (c === 46) { n = n * 256 + part; part = 0; } else part = part * 10 + (c - 48);
  }
  return n * 256 + part;
}

/** Room for `n` starts or ends: IPv4 addresses fit 32 bits unsigned (4 bytes each), IPv6 ones are bigints. */
const keys = <K extends Key>(n: number, big: boolean) => (big ? new Array<bigint>(n) : new Uint32Array(n)) as unknown as Sorted<K>['starts'];

function emptySorted<K extends Key>(big: boolean): Sorted<K> {
  return withParents<K>(0, keys(0, big), keys(0, big), new Uint8Array(0), new Int32Array(0), new Int32Array(0));
}

/** The sorted part from columns already in order (start ascending, end descending): each range's enclosing one found. */
function withParents<K extends Key>(n: number, starts: Sorted<K>['starts'], ends: Sorted<K>['ends'], deny: Uint8Array, h1: Int32Array, h2: Int32Array): Sorted<K> {
  const parent = new Int32Array(n);
  const stack: number[] = [];
  for (let i = 0; i < n; i++) {
    while (stack.length && ends[stack[stack.length - 1]] < starts[i]) stack.pop();
    parent[i] = stack.length ? stack[stack.length - 1] : -1;
    stack.push(i);
  }
  return { n, starts, ends, deny, parent, h1, h2, alive: new Uint8Array(n).fill(1), dead: 0 };
}

/** Sorted arrays from loose rules already in order (start ascending, end descending), with their enclosing ranges. */
function sortedOf<K extends Key>(items: Loose<K>[], big: boolean): Sorted<K> {
  const n = items.length;
  const starts = keys<K>(n, big), ends = keys<K>(n, big);
  const deny = new Uint8Array(n), h1 = new Int32Array(n), h2 = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const r = items[i];
    starts[i] = r.start; ends[i] = r.end; deny[i] = r.deny ? 1 : 0; h1[i] = r.h1; h2[i] = r.h2;
  }
  return withParents(n, starts, ends, deny, h1, h2);
}

const byRange = <K extends Key>(a: Loose<K>, b: Loose<K>) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.end > b.end ? -1 : a.end < b.end ? 1 : 0);

/** Whether an alive rule of `action` (or any, when undefined) holds `x`: the chain of ranges holding it, innermost first. */
function sortedHolds<K extends Key>(s: Sorted<K>, x: K, deny: number): boolean {
  let lo = 0, hi = s.n - 1, i = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (s.starts[mid] <= x) { i = mid; lo = mid + 1; } else hi = mid - 1;
  }
  while (i >= 0 && s.ends[i] < x) i = s.parent[i];
  for (; i >= 0; i = s.parent[i]) if (s.alive[i] && s.deny[i] === deny) return true;
  return false;
}

class Family<K extends Key> {
  constructor(readonly sorted: Sorted<K>, readonly loose: readonly Loose<K>[], private readonly big: boolean) {}

  static of<K extends Key>(rules: Loose<K>[], big: boolean): Family<K> {
    rules.sort(byRange);
    return new Family(sortedOf(rules, big), [], big);
  }

  holds(x: K, deny: number): boolean {
    for (const r of this.loose) if (r.deny === (deny === 1) && r.start <= x && x <= r.end) return true;
    return sortedHolds(this.sorted, x, deny);
  }

  get size() { return this.sorted.n - this.sorted.dead + this.loose.length; }

  added(r: Loose<K>): Family<K> {
    const f = new Family(this.sorted, [...this.loose, r], this.big);
    return f.loose.length > OVERLAY_MAX ? f.rebuilt() : f;
  }

  /** Without the rule whose hashes these are; undefined when it is not here, 'several' when the hashes are not unique. */
  removed(h1: number, h2: number): Family<K> | undefined | 'several' {
    const li = this.loose.findIndex((r) => r.h1 === h1 && r.h2 === h2);
    const s = this.sorted;
    let found = -1;
    for (let i = 0; i < s.n; i++) {
      if (s.h1[i] === h1 && s.h2[i] === h2 && s.alive[i]) {
        if (found >= 0) return 'several';
        found = i;
      }
    }
    if (li >= 0 && found >= 0) return 'several';
    if (li >= 0) return new Family(s, this.loose.filter((_r, i) => i !== li), this.big);
    if (found < 0) return undefined;
    const alive = s.alive.slice();
    alive[found] = 0;
    const f = new Family({ ...s, alive, dead: s.dead + 1 }, this.loose, this.big);
    return s.dead + 1 > OVERLAY_MAX ? f.rebuilt() : f;
  }

  /** The sorted part again with the loose rules merged in and the dead ones left out (linear, plus sorting the loose ones). */
  rebuilt(): Family<K> {
    const s = this.sorted;
    const loose = [...this.loose].sort(byRange);
    // Merged column by column (no object per rule: at a million rules this runs while requests wait).
    const n = s.n - s.dead + loose.length;
    const starts = keys<K>(n, this.big), ends = keys<K>(n, this.big);
    const deny = new Uint8Array(n), h1 = new Int32Array(n), h2 = new Int32Array(n);
    let k = 0;
    const putLoose = (r: Loose<K>) => {
      starts[k] = r.start; ends[k] = r.end; deny[k] = r.deny ? 1 : 0; h1[k] = r.h1; h2[k] = r.h2; k++;
    };
    let j = 0;
    for (let i = 0; i < s.n; i++) {
      if (!s.alive[i]) continue;
      const start = s.starts[i], end = s.ends[i];
      while (j < loose.length && (loose[j].start < start || (loose[j].start === start && loose[j].end > end))) putLoose(loose[j++]);
      starts[k] = start; ends[k] = end; deny[k] = s.deny[i]; h1[k] = s.h1[i]; h2[k] = s.h2[i]; k++;
    }
    while (j < loose.length) putLoose(loose[j++]);
    return new Family(withParents(n, starts, ends, deny, h1, h2), [], this.big);
  }
}

/** One policy's rules. Immutable: `with` and `without` return a new set. */
export class IpRuleSet {
  private constructor(private readonly v4: Family<number>, private readonly v6: Family<bigint>, private readonly allows: number) {}

  static readonly EMPTY = new IpRuleSet(new Family(emptySorted<number>(false), [], false), new Family(emptySorted<bigint>(true), [], true), 0);

  /** A set from rules in any order (one sort per family). */
  static of(rules: Iterable<IpRuleInput>): IpRuleSet {
    const b = new IpRuleSetBuilder();
    for (const r of rules) b.add(r);
    return b.build();
  }

  /** @internal */
  static fromFamilies(v4: Family<number>, v6: Family<bigint>, allows: number): IpRuleSet {
    return new IpRuleSet(v4, v6, allows);
  }

  /** How many rules (an IPv4-mapped IPv6 rule counts twice). */
  get size(): number {
    return this.v4.size + this.v6.size;
  }

  /** Whether any allow rule exists (then an address no allow rule holds is refused). */
  get hasAllow(): boolean {
    return this.allows > 0;
  }

  with(rule: IpRuleInput): IpRuleSet {
    const [h1, h2] = idHashes(rule.id);
    const deny = rule.action === 'deny';
    const ranges = rangesOf(rule.cidr);
    const v4 = ranges.v4 ? this.v4.added({ start: ranges.v4[0], end: ranges.v4[1], deny, h1, h2 }) : this.v4;
    const v6 = ranges.v6 ? this.v6.added({ start: ranges.v6[0], end: ranges.v6[1], deny, h1, h2 }) : this.v6;
    return new IpRuleSet(v4, v6, this.allows + (deny ? 0 : 1));
  }

  /**
   * Without the rule of this id: the set, the same set when the id is not one of its rules, or
   * undefined when its hashes are not unique here (the caller reads the policy again).
   */
  without(id: string, action?: IpAction): IpRuleSet | undefined {
    const [h1, h2] = idHashes(id);
    const v4 = this.v4.removed(h1, h2);
    const v6 = this.v6.removed(h1, h2);
    if (v4 === 'several' || v6 === 'several') return undefined;
    if (!v4 && !v6) return this;
    // Which action the rule had is told by the removed entry; allows only counts whether any is left.
    const wasAllow = action ? action === 'allow' : this.wasAllow(h1, h2);
    return new IpRuleSet(v4 ?? this.v4, v6 ?? this.v6, Math.max(0, this.allows - (wasAllow ? 1 : 0)));
  }

  private wasAllow(h1: number, h2: number): boolean {
    for (const f of [this.v4, this.v6] as Family<Key>[]) {
      for (const r of f.loose) if (r.h1 === h1 && r.h2 === h2) return !r.deny;
      const s = f.sorted;
      for (let i = 0; i < s.n; i++) if (s.h1[i] === h1 && s.h2[i] === h2 && s.alive[i]) return s.deny[i] === 0;
    }
    return false;
  }

  /** Whether a rule of `action` holds the address (4: a number, 6: a bigint, as addressKey gives). */
  holds(addr: AddressKey, action: IpAction): boolean {
    const deny = action === 'deny' ? 1 : 0;
    return addr.version === 4 ? this.v4.holds(addr.value as number, deny) : this.v6.holds(addr.value as bigint, deny);
  }
}

/**
 * Gathers a policy's rules as they are read and makes the set once. IPv4 rules (nearly all, at
 * a million) go into growing typed columns, no object per rule, and are ordered by a radix
 * sort of their (start, prefix length); others keep a small record each.
 */
export class IpRuleSetBuilder {
  private n4 = 0;
  private starts = new Uint32Array(0);
  private ends = new Uint32Array(0);
  private deny = new Uint8Array(0);
  private h1 = new Int32Array(0);
  private h2 = new Int32Array(0);
  private readonly v6: Loose<bigint>[] = [];
  private allows = 0;

  add(r: IpRuleInput) {
    hashRange(r.id, 0, r.id.length);
    const deny = r.action === 'deny';
    const ranges = rangesOf(r.cidr);
    if (ranges.v4) this.push4(ranges.v4[0], ranges.v4[1], deny);
    if (ranges.v6) this.v6.push({ start: ranges.v6[0], end: ranges.v6[1], deny, h1: H1, h2: H2 });
    if (!deny) this.allows++;
  }

  /**
   * The rule whose id is text[idFrom, idTo) and CIDR text[cidrFrom, cidrTo), read in place
   * (the start's batched read hands over one text per batch): an IPv4 CIDR is parsed without
   * making a string; anything else goes through add.
   */
  addText(text: string, idFrom: number, idTo: number, cidrFrom: number, cidrTo: number, deny: boolean) {
    let addr = 0, part = 0, digits = 0, dots = 0, len = 32, i = cidrFrom;
    for (; i < cidrTo; i++) {
      const c = text.charCodeAt(i);
      if (c >= 48 && c <= 57 && digits < 3) { part = part * 10 + (c - 48); digits++; }
      else if (c === 46 && digits && dots < 3 && part < 256) { addr = addr * 256 + part; part = 0; digits = 0; dots++; }
      else break;
    }
    let ok = dots === 3 && digits > 0 && part < 256;
    if (ok && i < cidrTo) {
      // "/len": one or two digits, at most 32.
      ok = text.charCodeAt(i) === 47 && cidrTo - i >= 2 && cidrTo - i <= 3;
      len = 0;
      for (let k = i + 1; ok && k < cidrTo; k++) {
        const c = text.charCodeAt(k);
        ok = c >= 48 && c <= 57;
        len = len * 10 + (c - 48);
      }
      ok &&= len <= 32;
    }
    if (!ok) {
      this.add({ id: text.slice(idFrom, idTo), cidr: text.slice(cidrFrom, cidrTo), action: deny ? 'deny' : 'allow' });
      return;
    }
    addr = addr * 256 + part;
    const size = 2 ** (32 - len);
    const start = addr - (addr % size);
    hashRange(text, idFrom, idTo);
    this.push4(start, start + size - 1, deny);
    if (!deny) this.allows++;
  }

  /** One IPv4 range, with the id hashes in H1 and H2. */
  private push4(start: number, end: number, deny: boolean) {
    if (this.n4 === this.starts.length) this.grow(Math.max(1024, this.n4 * 2));
    const i = this.n4++;
    this.starts[i] = start; this.ends[i] = end; this.deny[i] = deny ? 1 : 0; this.h1[i] = H1; this.h2[i] = H2;
  }

  private grow(cap: number) {
    const more = <T extends Uint32Array | Uint8Array | Int32Array>(a: T, make: new (n: number) => T) => { const b = new make(cap); b.set(a); return b; };
    this.starts = more(this.starts, Uint32Array); this.ends = more(this.ends, Uint32Array); this.deny = more(this.deny, Uint8Array);
    this.h1 = more(this.h1, Int32Array); this.h2 = more(this.h2, Int32Array);
  }

  build(): IpRuleSet {
    return IpRuleSet.fromFamilies(this.buildV4(), Family.of(this.v6, true), this.allows);
  }

  /** The IPv4 columns in order: start ascending, then the wider range first (the shorter prefix). */
  private buildV4(): Family<number> {
    const n = this.n4;
    const order = radixOrder(n, this.starts, this.ends);
    const starts = new Uint32Array(n), ends = new Uint32Array(n), deny = new Uint8Array(n), h1 = new Int32Array(n), h2 = new Int32Array(n);
    for (let k = 0; k < n; k++) {
      const i = order[k];
      starts[k] = this.starts[i]; ends[k] = this.ends[i]; deny[k] = this.deny[i]; h1[k] = this.h1[i]; h2[k] = this.h2[i];
    }
    return new Family(withParents<number>(n, starts, ends, deny, h1, h2), [], false);
  }
}

/**
 * The order of n IPv4 ranges by start, wider first among equal starts: three stable counting
 * passes (prefix length, then the start's low and high 16 bits), linear in n.
 */
function radixOrder(n: number, starts: Uint32Array, ends: Uint32Array): Uint32Array {
  let a = new Uint32Array(n);
  let b = new Uint32Array(n);
  for (let i = 0; i < n; i++) a[i] = i;
  const count = new Uint32Array(65537);
  for (let pass = 0; pass < 3; pass++) {
    count.fill(0);
    // The key: Math.clz32(size - 1) is the prefix length (0-32); then start & 0xffff; then start >>> 16.
    const key = pass === 0 ? (i: number) => Math.clz32(ends[i] - starts[i]) : pass === 1 ? (i: number) => starts[i] & 0xffff : (i: number) => starts[i] >>> 16;
    for (let k = 0; k < n; k++) count[key(a[k]) + 1]++;
    for (let k = 1; k < 65537; k++) count[k] += count[k - 1];
    for (let k = 0; k < n; k++) { const i = a[k]; b[count[key(i)]++] = i; }
    [a, b] = [b, a];
  }
  return a;
}

export interface AddressKey { version: 4 | 6; value: number | bigint }

/** An address as the sets compare it (IPv4-mapped IPv6 as IPv4), or undefined when it is not an IP. */
export function addressKey(ip: string): AddressKey | undefined {
  let addr = ip.replace(/%.*$/, '');
  if (/^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(addr)) addr = addr.slice(7);
  if (net.isIPv4(addr)) return { version: 4, value: v4Number(addr) };
  if (net.isIPv6(addr)) return { version: 6, value: ipToBigInt(addr, 6) };
  return undefined;
}
