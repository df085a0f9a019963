// Memory an IP policy's rules hold in the routing table (docs/operations.md, "Sizing for
// large configurations"): heap and array buffers after a full GC, before and after making a
// set of N rules (IPv4 /32s, then IPv6 /128s) with the builder the start's read uses.
//   node --expose-gc --import tsx bench/ip-rules-memory.ts [--n 1000000]
import { IpRuleSetBuilder, type IpRuleSet } from '../server/ingress/ip-rules.js';

const i = process.argv.indexOf('--n');
const N = i > 0 ? Number(process.argv[i + 1]) : 1_000_000;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const used = () => { gc(); gc(); const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };

function make(v6: boolean): IpRuleSet {
  const b = new IpRuleSetBuilder();
  for (let k = 0; k < N; k++) {
    const n = 0x0a000000 + k;
    const cidr = v6 ? `2001:db8::${(k >>> 16).toString(16)}:${(k & 0xffff).toString(16)}/128` : `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}/32`;
    b.add({ id: `ipr_${String(k).padStart(27, '0')}`, cidr, action: 'deny' });
  }
  return b.build();
}

for (const v6 of [false, true]) {
  const before = used();
  const set = make(v6);
  const after = used();
  console.log(`${N} ${v6 ? 'IPv6 /128' : 'IPv4 /32'} rules in one set: ${((after - before) / 2 ** 20).toFixed(1)} MiB, ${((after - before) / N).toFixed(1)} bytes a rule (${set.size} held)`);
}
