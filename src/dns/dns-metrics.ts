import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { DnsCatalogue } from './catalogue.js';
import type { DnsQueryRecord, DnsServerObserver } from './dns-server.js';
import type { DnsFeed } from './feed.js';

/** Buckets of `regsync_dns_query_duration_seconds`: in-zone answers take microseconds, forwarded ones a round trip. */
const DURATION_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5];

/** QTYPEs counted by name; any other (a client may send all 65,536) counts as `OTHER`, so label values stay bounded. */
const QTYPES = new Set(['A', 'AAAA', 'SRV', 'TXT', 'SOA', 'NS', 'ANY', 'PTR', 'CNAME', 'MX', 'HTTPS', 'SVCB', 'NONE']);

/**
 * The DNS server's Prometheus series, in the process's registry:
 * - `regsync_dns_queries_total{qtype, rcode, transport}`: answered queries (QTYPEs outside the
 *   common ones count as `OTHER`);
 * - `regsync_dns_answer_records_total{qtype}`: records in the answer sections;
 * - `regsync_dns_stale_answers_total`: answers from a registry that cannot be read now (serve stale);
 * - `regsync_dns_forwarded_total{outcome}`: names outside the zone sent upstream (answered, failed,
 *   timeout, busy);
 * - `regsync_dns_truncated_total`: UDP answers sent with TC;
 * - `regsync_dns_dropped_total{reason}`: messages not answered (malformed, rateLimited, notQuery);
 * - `regsync_dns_query_duration_seconds{forwarded}`: from receipt to reply;
 * - gauges read at scrape time: `regsync_dns_services`, `regsync_dns_names`, `regsync_dns_collisions`,
 *   `regsync_dns_cluster_stale{cluster}` (1 while its answers are stale).
 * Labels are fixed words and cluster ids: never names or addresses.
 */
export class DnsMetrics implements DnsServerObserver {
  private readonly queries: Counter<'qtype' | 'rcode' | 'transport'>;
  private readonly records: Counter<'qtype'>;
  private readonly stale: Counter;
  private readonly forwarded: Counter<'outcome'>;
  private readonly truncated: Counter;
  private readonly drops: Counter<'reason'>;
  private readonly duration: Histogram<'forwarded'>;

  constructor(registry: Registry, sources: { catalogue: DnsCatalogue; feed: DnsFeed }) {
    const registers = [registry];
    this.queries = new Counter({ name: 'regsync_dns_queries_total', help: 'DNS queries answered, by QTYPE, RCODE and transport.', labelNames: ['qtype', 'rcode', 'transport'], registers });
    this.records = new Counter({ name: 'regsync_dns_answer_records_total', help: 'Records in DNS answer sections, by QTYPE.', labelNames: ['qtype'], registers });
    this.stale = new Counter({ name: 'regsync_dns_stale_answers_total', help: 'DNS answers served from the last good read of a registry that cannot be read now.', registers });
    this.forwarded = new Counter({ name: 'regsync_dns_forwarded_total', help: 'Queries for names outside the zone sent upstream, by outcome (answered, failed, timeout, busy).', labelNames: ['outcome'], registers });
    this.truncated = new Counter({ name: 'regsync_dns_truncated_total', help: 'UDP answers sent truncated (TC), for the client to ask again over TCP.', registers });
    this.drops = new Counter({ name: 'regsync_dns_dropped_total', help: 'DNS messages not answered, by reason (malformed, rateLimited, notQuery).', labelNames: ['reason'], registers });
    this.duration = new Histogram({ name: 'regsync_dns_query_duration_seconds', help: 'From receipt of a DNS query to its reply, by whether it was forwarded.', labelNames: ['forwarded'], buckets: DURATION_BUCKETS, registers });
    const { catalogue, feed } = sources;
    new Gauge({ name: 'regsync_dns_services', help: 'Services the DNS server answers for.', registers, collect() { this.set(catalogue.stats().services); } });
    new Gauge({ name: 'regsync_dns_names', help: 'Names in the DNS index.', registers, collect() { this.set(catalogue.stats().names); } });
    new Gauge({ name: 'regsync_dns_collisions', help: 'DNS names two or more services want (see the DNS status route).', registers, collect() { this.set(catalogue.stats().collisions); } });
    new Gauge({
      name: 'regsync_dns_cluster_stale',
      help: 'Whether answers from the cluster come from its last good read (1) or are fresh (0).',
      labelNames: ['cluster'],
      registers,
      collect() {
        this.reset();
        for (const c of feed.status()) this.set({ cluster: c.id }, c.state === 'stale' ? 1 : 0);
      },
    });
  }

  query(record: DnsQueryRecord): void {
    const qtype = QTYPES.has(record.qtype) ? record.qtype : 'OTHER';
    this.queries.inc({ qtype, rcode: record.rcode, transport: record.transport });
    if (record.answers > 0) this.records.inc({ qtype }, record.answers);
    if (record.stale) this.stale.inc();
    if (record.truncated) this.truncated.inc();
    if (record.forwarded !== undefined) this.forwarded.inc({ outcome: record.forwarded });
    this.duration.observe({ forwarded: record.forwarded === undefined ? 'no' : 'yes' }, record.seconds);
  }

  dropped(reason: 'malformed' | 'rateLimited' | 'notQuery'): void {
    this.drops.inc({ reason });
  }
}
