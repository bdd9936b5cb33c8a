import { createConnection, createServer, type Socket } from 'node:net';

/** Injected one-way delays of a {@link TcpGate}, ms. */
export interface GateLatency {
  /** Client -> server. */
  upMs: number;
  /** Server -> client. */
  downMs: number;
}

/** Options of {@link startTcpGate}. */
export interface TcpGateOptions {
  /** Delay of every byte, each way; default none. Change it later with {@link TcpGate.latency}. */
  latency?: GateLatency;
  /**
   * Bytes held per direction of one connection (delayed or partitioned) before the gate stops
   * reading from the sender, as a full TCP window would; default 4 MiB.
   */
  maxBufferedBytes?: number;
}

/** A TCP pass-through in front of one server that a test can cut, hold, partition, slow down and open again. */
export interface TcpGate {
  /** `127.0.0.1:port`: give this to regsync instead of the server's endpoint. */
  endpoint: string;
  /** Drops every connection through the gate and refuses new ones (reset at once), as a server that went down. */
  cut(): void;
  /**
   * Drops every connection through the gate and holds new ones open without an answer, as a
   * server that hangs: a request through it waits for its own timeout.
   */
  hold(): void;
  /**
   * A network partition: no byte crosses either way and nobody is told. Connections stay open (what
   * is sent meanwhile is held, as TCP retransmits it, up to the buffer bound), new ones are accepted
   * and go nowhere; {@link open} delivers what was held, in order, as a healed link would.
   */
  partition(): void;
  /** Lets connections through again (held ones are dropped; partitioned ones go on with what they sent). */
  open(): void;
  /** Connections refused (reset at once) while cut, so far: how often a client tried again. */
  refused(): number;
  /** Sets the injected delay each way (0, 0: none); bytes already under way keep the delay they got. */
  latency(latency: GateLatency): void;
  /** Connections accepted by the gate so far. */
  connections(): number;
  close(): Promise<void>;
}

/**
 * One direction of a connection: each chunk is due its delay after it arrived, and is delivered in
 * order once due while the gate is open. Past `maxBytes` held, the sender is no longer read.
 */
class Lane {
  private readonly queue: Array<{ due: number; chunk: Buffer | 'end' }> = [];
  private bytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly delayMs: () => number,
    private readonly flowing: () => boolean,
    private readonly maxBytes: number,
  ) {
    from.on('data', (chunk: Buffer) => this.push(chunk));
    from.on('end', () => this.push('end'));
    to.on('drain', () => this.pump());
  }

  private push(chunk: Buffer | 'end'): void {
    this.queue.push({ due: Date.now() + this.delayMs(), chunk });
    if (chunk !== 'end') this.bytes += chunk.length;
    this.pump();
  }

  /** Delivers what is due; called on arrival, by the timer, on drain and when the gate opens. */
  pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.to.destroyed) return;
    const now = Date.now();
    while (this.flowing() && this.to.writableNeedDrain === false && this.queue.length > 0 && (this.queue[0]?.due ?? 0) <= now) {
      const { chunk } = this.queue.shift() as { chunk: Buffer | 'end' };
      if (chunk === 'end') this.to.end();
      else {
        this.bytes -= chunk.length;
        this.to.write(chunk);
      }
    }
    if (this.bytes > this.maxBytes) this.from.pause();
    else if (this.from.isPaused()) this.from.resume();
    const next = this.queue[0];
    if (next && this.flowing() && !this.to.writableNeedDrain) this.timer = setTimeout(() => this.pump(), Math.max(0, next.due - now));
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/**
 * Starts a {@link TcpGate} to `target` (`host:port`). Why: a registry (or Redis) that is "down",
 * partitioned away or far away for regsync while its data stays where the test can read it, and
 * comes back without a new port. Latency and partitions are the gate's own (no `tc netem`): loopback only.
 */
export async function startTcpGate(target: string, opts: TcpGateOptions = {}): Promise<TcpGate> {
  const at = target.lastIndexOf(':');
  const [host, port] = [target.slice(0, at), Number(target.slice(at + 1))];
  const maxBytes = opts.maxBufferedBytes ?? 4 * 1024 * 1024;
  const sockets = new Set<Socket>();
  let refused = 0;
  const lanes = new Set<Lane>();
  let mode: 'open' | 'cut' | 'hold' | 'partition' = 'open';
  let delays: GateLatency = opts.latency ?? { upMs: 0, downMs: 0 };
  let accepted = 0;
  const held = new Set<Socket>();
  const flowing = () => mode === 'open';
  const server = createServer((client) => {
    accepted += 1;
    if (mode === 'cut') {
      refused += 1;
      client.resetAndDestroy();
      return;
    }
    if (mode === 'hold') {
      held.add(client);
      client.on('error', () => client.destroy());
      client.on('close', () => held.delete(client));
      return;
    }
    const upstream = createConnection({ host, port });
    const connLanes = [
      new Lane(client, upstream, () => delays.upMs, flowing, maxBytes),
      new Lane(upstream, client, () => delays.downMs, flowing, maxBytes),
    ];
    for (const lane of connLanes) lanes.add(lane);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => {
        sockets.delete(s);
        for (const lane of connLanes) {
          lane.stop();
          lanes.delete(lane);
        }
      });
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const local = typeof address === 'object' && address ? address.port : 0;
  return {
    endpoint: `127.0.0.1:${local}`,
    cut() {
      mode = 'cut';
      for (const s of sockets) s.resetAndDestroy();
    },
    hold() {
      mode = 'hold';
      for (const s of sockets) s.resetAndDestroy();
    },
    partition() {
      mode = 'partition';
    },
    open() {
      mode = 'open';
      for (const s of held) s.resetAndDestroy();
      for (const lane of lanes) lane.pump();
    },
    refused: () => refused,
    latency(latency) {
      delays = { ...latency };
    },
    connections: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const lane of lanes) lane.stop();
        for (const s of [...sockets, ...held]) s.destroy();
        server.close(() => resolve());
      }),
  };
}
