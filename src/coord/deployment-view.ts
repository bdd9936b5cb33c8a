import type { Redis } from 'ioredis';
import type { Deployment } from './deployment.js';
import { readLeases } from './lease.js';
import { listWorkers, type WorkerStatus } from './membership.js';
import { replicasFor } from './rendezvous.js';

/** One shard as the API shows it. */
export interface ShardView {
  shard: number;
  leader: string | null;
  token: number | null;
  leaseTtlLeftMs: number | null;
  /** How long the leader has held the lease (since its token was handed out), ms. */
  leaseAgeMs: number | null;
  replicas: string[];
  queueDepth: number;
  serviceSyncs: number;
}

/** `GET /api/v1/shards`. */
export interface ShardsView {
  shards: number;
  replicas: number;
  items: ShardView[];
}

/** One worker as the API shows it. */
export interface WorkerView {
  id: string;
  host: string;
  pid: number;
  startedAt: string;
  roles: string[];
  /** Shards whose lease it holds. */
  leads: number[];
  /** Shards it is a replica of. */
  serves: number[];
  /** How its parts were doing at its last heartbeat. */
  status: WorkerStatus;
}

/**
 * The deployment as any process reads it from Redis: live workers, leases, rendezvous replica sets,
 * queue depths and service syncs per shard. Needs no membership of its own (the API role has none).
 */
export class DeploymentView {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly deployment: () => Promise<Deployment>,
    private readonly queueDepth: (shard: number) => Promise<number>,
    private readonly serviceSyncs: (shards: number) => Promise<Map<number, number>>,
  ) {}

  async shards(): Promise<ShardsView> {
    const { shards, replicas } = await this.deployment();
    const all = Array.from({ length: shards }, (_, i) => i);
    const [workers, leases, depths, syncs] = await Promise.all([
      listWorkers(this.redis, this.prefix),
      readLeases(this.redis, this.prefix, all),
      Promise.all(all.map((s) => this.queueDepth(s))),
      this.serviceSyncs(shards),
    ]);
    const ids = workers.filter((w) => w.roles.includes('worker')).map((w) => w.id);
    return {
      shards,
      replicas,
      items: all.map((shard) => {
        const lease = leases[shard];
        return {
          shard,
          leader: lease?.owner ?? null,
          token: lease?.token ?? null,
          leaseTtlLeftMs: lease?.ttlLeftMs ?? null,
          leaseAgeMs: lease?.acquiredAtMs !== undefined ? Math.max(0, Date.now() - lease.acquiredAtMs) : null,
          replicas: replicasFor(shard, ids, replicas),
          queueDepth: depths[shard] ?? 0,
          serviceSyncs: syncs.get(shard) ?? 0,
        };
      }),
    };
  }

  async workers(): Promise<{ items: WorkerView[] }> {
    const { shards, replicas } = await this.deployment();
    const all = Array.from({ length: shards }, (_, i) => i);
    const [workers, leases] = await Promise.all([listWorkers(this.redis, this.prefix), readLeases(this.redis, this.prefix, all)]);
    const ids = workers.filter((w) => w.roles.includes('worker')).map((w) => w.id);
    return {
      items: workers.map((w) => ({
        id: w.id,
        host: w.host,
        pid: w.pid,
        startedAt: w.startedAt,
        roles: w.roles,
        leads: all.filter((s) => leases[s]?.owner === w.id),
        serves: all.filter((s) => replicasFor(s, ids, replicas).includes(w.id)),
        status: w.status ?? {},
      })),
    };
  }

  /** One part's status (`cmdb`, say) of every live worker that reports it, as of its last heartbeat. */
  async partStatus(part: string): Promise<{ items: Array<{ worker: string } & Record<string, unknown>> }> {
    const workers = await listWorkers(this.redis, this.prefix);
    return {
      items: workers.flatMap((w) => {
        const status = w.status?.[part];
        return typeof status === 'object' && status !== null ? [{ worker: w.id, ...(status as Record<string, unknown>) }] : [];
      }),
    };
  }
}
