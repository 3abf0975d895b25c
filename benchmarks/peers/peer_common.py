"""Timing and the JSON line shared by the Python peers (kazoo_bench.py,
redis_py_bench.py): the fields and percentile rule of benchmarks/common.hpp,
plus peak_rss_kb and peer_version."""
import json
import resource
import threading
import time


class Recorder:
    """Latencies (thread-safe appends) and the wall and process CPU time of one run."""

    def __init__(self):
        self.latencies_us = []
        self._lock = threading.Lock()
        self.seconds = 0.0
        self.cpu_us = 0.0

    def start(self):
        self.latencies_us = []
        self._wall = time.perf_counter()
        self._cpu = time.process_time()  # user + system, every thread of the process

    def stop(self):
        self.seconds = time.perf_counter() - self._wall
        self.cpu_us = (time.process_time() - self._cpu) * 1e6

    def add_many(self, latencies_us):
        with self._lock:
            self.latencies_us.extend(latencies_us)

    def percentile(self, q):
        if not self.latencies_us:
            return 0.0
        index = int(q * (len(self.latencies_us) - 1) + 0.5)
        return self.latencies_us[min(index, len(self.latencies_us) - 1)]

    def print(self, bench, impl, ops, peer_version):
        self.latencies_us.sort()
        line = {
            "bench": bench, "impl": impl, "ops": ops,
            "seconds": round(self.seconds, 3),
            "ops_per_s": round(ops / self.seconds if self.seconds > 0 else 0, 3),
            "p50_us": round(self.percentile(0.50), 3),
            "p99_us": round(self.percentile(0.99), 3),
            "cpu_us_per_op": round(self.cpu_us / ops if ops else 0, 3),
            # Linux reports ru_maxrss in KiB; per process, like dlock's.
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "peer_version": peer_version,
        }
        print(json.dumps(line, separators=(",", ":")), flush=True)


def run_threads(count, body):
    """Runs body(i) on `count` threads and re-raises the first failure."""
    failures = []

    def guarded(i):
        try:
            body(i)
        except BaseException as e:  # reported below, on the main thread
            failures.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
