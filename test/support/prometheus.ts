import { Readable } from 'node:stream';
import { getMetricsFromStream, type PromMetrics } from 'prom2javascript';

/** One sample of a parsed metric family (value for counters and gauges; count, sum, buckets for histograms). */
export interface ParsedSample {
  labels: Record<string, string>;
  value?: number;
  count?: number;
  sum?: number;
  buckets?: Record<string, number>;
}

/** A scrape parsed by a real Prometheus text-format parser: metric families by name. */
export interface Scrape {
  families: Map<string, { type: string; help: string; samples: ParsedSample[] }>;
  /** Samples of `name` whose labels include `labels`. */
  samples(name: string, labels?: Record<string, string>): ParsedSample[];
  /** The value of the one counter or gauge sample of `name` with `labels`; undefined when there is none. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Sum of the values (counters, gauges) or counts (histograms) of every sample matching `labels`; 0 when none. */
  total(name: string, labels?: Record<string, string>): number;
}

/**
 * Parses Prometheus text with `prom2javascript` (a test fails when the exposition is not valid
 * text format: the parser rejects lines it cannot read; labelled histograms are parsed per label
 * set, which `parse-prometheus-text-format` 1.1.1 gets wrong). Families are keyed by their name as
 * declared in `# TYPE` (a counter `x_total` stays `x_total`; a histogram `h` holds `h_bucket`,
 * `h_sum` and `h_count` per label set).
 */
export async function parseScrape(text: string): Promise<Scrape> {
  // The parser knows no NaN, which the format allows (prom-client writes `Nan`, as Go's ParseFloat
  // reads it, for an event loop gauge before its first sample): such lines are checked here and
  // left out of what it parses.
  const lines = text.split('\n').filter((line) => {
    if (!/ nan$/i.test(line)) return true;
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? nan$/i.test(line)) throw new Error(`not a Prometheus sample line: ${line}`);
    return false;
  });
  const parsed: PromMetrics = await getMetricsFromStream(Readable.from([lines.join('\n')]));
  const families = new Map<string, { type: string; help: string; samples: ParsedSample[] }>();
  for (const [name, family] of Object.entries(parsed)) {
    families.set(name, { type: family.type, help: family.help, samples: (family.data as ParsedSample[]).map((s) => ({ ...s, labels: { ...s.labels } })) });
  }
  const samples = (name: string, labels: Record<string, string> = {}) =>
    (families.get(name)?.samples ?? []).filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return {
    families,
    samples,
    value(name, labels) {
      const found = samples(name, labels);
      if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
      return found[0]?.value;
    },
    total(name, labels) {
      return samples(name, labels).reduce((sum, s) => sum + (s.value ?? s.count ?? 0), 0);
    },
  };
}

/** GETs `url` (a /metrics endpoint) and parses it; fails unless it is 200 with Prometheus' text content type. */
export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url} answered ${res.status}: ${text.slice(0, 200)}`);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain') || !type.includes('version=0.0.4')) throw new Error(`GET ${url}: unexpected content type ${type}`);
  return parseScrape(text);
}
