#!/usr/bin/python3
"""kazoo's Lock recipe through dlock's ZooKeeper lock scenarios
(benchmarks/zk_mutex.cpp), written the way kazoo's documentation shows: a
started KazooClient per session (the default threading handler), a zk.Lock
per contender, acquire() and release() on the contender's own thread.

Usage: kazoo_bench.py SCENARIO HOSTS PATHS PER_PATH ROUNDS [SESSIONS]

PATHS x PER_PATH contenders on PATHS lock paths, ROUNDS acquire+release
each; contender i uses KazooClient i mod SESSIONS (default 1; one per
contender stands for contenders in separate processes). The latency is the
acquire's, as dlock's. A warm-up of a quarter of the
rounds runs first on other paths, as for the other peers. Debian's
python3-kazoo, so run with /usr/bin/python3.
"""
import os
import sys
import time

import kazoo.version
from kazoo.client import KazooClient

from peer_common import Recorder, run_threads


def run(clients, base, paths, per_path, rounds, recorder):
    def contender(index):
        zk = clients[index % len(clients)]
        lock = zk.Lock(f"{base}/lock-{index // per_path}", f"contender-{index}")
        mine = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            lock.acquire()
            mine.append((time.perf_counter() - t0) * 1e6)
            lock.release()
        recorder.add_many(mine)

    run_threads(paths * per_path, contender)


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    scenario, hosts = sys.argv[1], sys.argv[2]
    paths, per_path, rounds = (int(a) for a in sys.argv[3:6])
    sessions = int(sys.argv[6]) if len(sys.argv) == 7 else 1
    root = f"/dlock-peer-kazoo-{os.getpid()}"
    clients = []
    try:
        for _ in range(sessions):
            clients.append(KazooClient(hosts=hosts))
            clients[-1].start()
        run(clients, f"{root}/warm", paths, per_path, max(20, rounds // 4), Recorder())
        recorder = Recorder()
        recorder.start()
        run(clients, f"{root}/{scenario}", paths, per_path, rounds, recorder)
        recorder.stop()
        version = f"kazoo {kazoo.version.__version__}, python {sys.version.split()[0]}"
        recorder.print(scenario, "kazoo", paths * per_path * rounds, version)
    finally:
        for zk in clients:
            zk.stop()
            zk.close()


if __name__ == "__main__":
    main()
