// GET /metrics with ingress workers (server/cluster/, Metrics.othersOf): the workers' ingress
// metrics are added up into the primary's under the same names and labels, rendered as one
// process renders its own; every other metric stays the primary's.
import { describe, expect, it } from 'vitest';
import { isIngressMetric, Metrics } from '../../server/http/metrics.js';

/** The lines of one metric family (its samples, without HELP and TYPE). */
const family = (text: string, name: string) => text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `) || l.startsWith(`${name}_`));

describe('Metrics.othersOf (ingress workers)', () => {
  it('adds up the workers\' ingress counters, histograms and gauges as one process would count them', async () => {
    const one = new Metrics();
    const workers = [new Metrics(), new Metrics()];
    const observe = (m: Metrics, i: number) => {
      m.observeIngress('edghts_a', i % 3 ? 200 : 502, 0.002 * i);
      m.ingressConnections.inc({ port: '443', outcome: 'served' });
      m.ingressOpen.inc({ port: '443' });
    };
    for (let i = 0; i < 10; i++) {
      observe(one, i);
      observe(workers[i % 2], i);
    }
    one.tableVersionOf = () => 7;
    workers[0].tableVersionOf = () => 7;
    workers[1].tableVersionOf = () => 6;
    const primary = new Metrics();
    primary.tableVersionOf = () => 5;
    primary.othersOf = async () => Promise.all(workers.map(async (w) => (await w.registry.getMetricsAsJSON()).filter(isIngressMetric)));
    const [alone, summed] = [(await one.render()).text, (await primary.render()).text];
    for (const name of ['edgeform_ingress_requests_total', 'edgeform_ingress_request_duration_seconds', 'edgeform_ingress_connections_total', 'edgeform_ingress_open_connections', 'edgeform_ingress_table_version']) {
      expect(family(summed, name), name).toEqual(family(alone, name));
      expect(family(summed, name).length, name).toBeGreaterThan(0);
    }
    // The primary's own metrics are there once, under their names (the process's, not summed).
    expect(summed).toContain('# TYPE edgeform_process_start_time_seconds gauge');
    expect(summed.match(/^# TYPE edgeform_ingress_requests_total counter$/gm)).toHaveLength(1);
  });
});
