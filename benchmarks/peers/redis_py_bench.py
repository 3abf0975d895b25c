#!/usr/bin/python3
"""redis-py's Lock through dlock's single-instance Redis scenarios
(benchmarks/redis_lock.cpp), written the way redis-py's documentation shows:
one redis.Redis client (its connection pool; hiredis's parser when installed,
as the documentation recommends), r.lock(name, timeout=...) per key,
acquire() and release(). Concurrent clients are threads sharing the client,
each taking a pooled connection per command.

Usage: redis_py_bench.py SCENARIO HOST:PORT CLIENTS ROUNDS

CLIENTS keys, ROUNDS acquire+release each; the latency is the
acquire+release's, as dlock's. A warm-up of a quarter of the rounds runs first
(it also loads the release script). Debian's python3-redis, so run with
/usr/bin/python3.
"""
import os
import sys
import time

import redis
from redis.utils import HIREDIS_AVAILABLE

from peer_common import Recorder, run_threads

TTL_S = 10  # dlock's benchmark uses PX 10000


def run(r, prefix, clients, rounds, recorder):
    def client(index):
        lock = r.lock(f"{prefix}-{index}", timeout=TTL_S)
        mine = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            if not lock.acquire():
                raise RuntimeError("acquire failed on an uncontended key")
            lock.release()
            mine.append((time.perf_counter() - t0) * 1e6)
        recorder.add_many(mine)

    run_threads(clients, client)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    scenario, master = sys.argv[1], sys.argv[2]
    clients, rounds = int(sys.argv[3]), int(sys.argv[4])
    host, port = master.rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    prefix = f"bench-peer-redis-py-{os.getpid()}-{scenario}"
    run(r, prefix + "-warm", clients, max(20, rounds // 4), Recorder())
    recorder = Recorder()
    recorder.start()
    run(r, prefix, clients, rounds, recorder)
    recorder.stop()
    version = (f"redis-py {redis.__version__}{' with hiredis' if HIREDIS_AVAILABLE else ''}, "
               f"python {sys.version.split()[0]}")
    recorder.print(scenario, "redis-py", clients * rounds, version)
    r.close()


if __name__ == "__main__":
    main()
