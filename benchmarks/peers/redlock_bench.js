// node-redlock (the npm package `redlock`) over ioredis, through dlock's Redis
// scenarios (benchmarks/redis_lock.cpp and benchmarks/redlock.cpp), written
// the way node-redlock's README shows: one ioredis client per master, one
// Redlock over them with its default settings, redlock.lock(resource, ttl)
// and lock.unlock(). Concurrent clients are async loops sharing the Redlock
// (node runs them on its one event loop, pipelining on each connection).
//
//   node redlock_bench.js SCENARIO HOST:PORT[,HOST:PORT...] CLIENTS ROUNDS
//
// CLIENTS keys, ROUNDS lock+unlock each; the latency is the lock+unlock's, as
// dlock's. A warm-up of a quarter of the rounds runs first (connections, the
// scripts' cache, the JIT). Versions are pinned in package-lock.json
// (npm ci --prefix benchmarks/peers).
'use strict';
const Redis = require('ioredis');
const Redlock = require('redlock');

const TTL_MS = 10000; // dlock's benchmark uses PX 10000

async function run(redlock, prefix, clients, rounds, latencies) {
  async function client(index) {
    const resource = `${prefix}-${index}`;
    for (let i = 0; i < rounds; ++i) {
      const t0 = process.hrtime.bigint();
      const lock = await redlock.lock(resource, TTL_MS);
      await lock.unlock();
      if (latencies) latencies.push(Number(process.hrtime.bigint() - t0) / 1e3);
    }
  }
  await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
}

// The same index rule as benchmarks/common.hpp's percentile.
function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(Math.floor(q * (sorted.length - 1) + 0.5), sorted.length - 1)];
}

function cpuUs() {
  const u = process.cpuUsage(); // user + system, in microseconds
  return u.user + u.system;
}

async function main() {
  const [scenario, masters, clientsArg, roundsArg] = process.argv.slice(2);
  if (!roundsArg) {
    console.error('usage: redlock_bench.js SCENARIO HOST:PORT[,HOST:PORT...] CLIENTS ROUNDS');
    process.exit(2);
  }
  const clients = Number(clientsArg), rounds = Number(roundsArg);
  const servers = masters.split(',').map((m) => {
    const colon = m.lastIndexOf(':');
    return new Redis(Number(m.slice(colon + 1)), m.slice(0, colon));
  });
  const redlock = new Redlock(servers);
  redlock.on('clientError', (err) => console.error('redlock: a redis error occurred:', err));
  const prefix = `bench-peer-node-redlock-${process.pid}-${scenario}`;

  await run(redlock, `${prefix}-warm`, clients, Math.max(20, Math.floor(rounds / 4)), null);
  const latencies = [];
  const cpuBefore = cpuUs();
  const started = process.hrtime.bigint();
  await run(redlock, prefix, clients, rounds, latencies);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpuUsed = cpuUs() - cpuBefore;
  latencies.sort((a, b) => a - b);
  const ops = clients * rounds;
  const round3 = (x) => Math.round(x * 1000) / 1000;
  const version = `redlock ${require('redlock/package.json').version}, ioredis ${require('ioredis/package.json').version}, node ${process.versions.node}`;
  console.log(JSON.stringify({
    bench: scenario, impl: 'node-redlock', ops, seconds: round3(seconds), ops_per_s: round3(ops / seconds),
    p50_us: round3(percentile(latencies, 0.5)), p99_us: round3(percentile(latencies, 0.99)),
    cpu_us_per_op: round3(cpuUsed / ops),
    peak_rss_kb: process.resourceUsage().maxRSS, // KiB, per process
    peer_version: version,
  }));
  await Promise.all(servers.map((s) => s.quit()));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
