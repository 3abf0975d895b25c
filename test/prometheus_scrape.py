#!/usr/bin/env python3
"""Runs examples/prometheus_metrics, scrapes its endpoint over HTTP and checks the figures.

Usage: prometheus_scrape.py PATH/TO/prometheus_metrics

The example prints "metrics: <url>", drives a fixed amount of work through
locks and a queue that report to its observer, prints "driven", and serves
until its stdin is closed. The figures expected here follow that work
(drive() in examples/prometheus_metrics.cpp): change one, change the other.
Exits 0 when every figure is right and the example, its stdin closed, then
exits 0 by itself within 20 s. Reads DLOCK_REDIS_MASTERS as the example does.
"""
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request

DRIVEN_WITHIN = 120  # seconds: a sanitizer build on a loaded 2-core machine
EXIT_WITHIN = 20

# The work of drive(): acquisitions that succeed, per kind.
REDIS_LOCKS = 5 + 1  # five contenders, and the lock lost on purpose
ZK_MUTEXES = 5
REDLOCKS = 5
HOLDS = REDIS_LOCKS + ZK_MUTEXES + REDLOCKS  # every successful acquire ends one hold

# One sample line of the text format: name{labels} value [timestamp].
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Failure(Exception):
    pass


def parse(text):
    """{(name, frozenset of (label, value)): value} of a text exposition."""
    samples = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith('#'):
            continue
        match = SAMPLE.match(line)
        if not match:
            raise Failure(f'cannot parse the scraped line {line!r}')
        name, labels, value = match.groups()
        samples[(name, frozenset(LABEL.findall(labels or '')))] = float(value)
    return samples


def first_masters(count):
    """The first `count` masters of DLOCK_REDIS_MASTERS, as the example names them ("host:port")."""
    listed = os.environ.get('DLOCK_REDIS_MASTERS', '127.0.0.1:6379')
    return [item.strip() for item in listed.split(',') if item.strip()][:count]


class Checks:
    def __init__(self, samples):
        self.samples = samples
        self.failures = []
        self.count = 0

    def value(self, name, **labels):
        """The sample with exactly these labels, or None."""
        return self.samples.get((name, frozenset(labels.items())))

    def total(self, name, **labels):
        """The sum of the samples of `name` whose labels include these."""
        wanted = set(labels.items())
        return sum(v for (n, l), v in self.samples.items() if n == name and wanted <= l)

    def check(self, ok, what):
        self.count += 1
        if not ok:
            self.failures.append(what)

    def equal(self, got, expected, what):
        shown = 'nothing' if got is None else f'{got:g}'
        self.check(got == expected, f'{what}: expected {expected}, scraped {shown}')


def check_figures(samples):
    c = Checks(samples)
    acquisitions = 'dlock_acquisitions_total'
    c.equal(c.value(acquisitions, kind='redis_lock', outcome='ok'), REDIS_LOCKS, 'redis_lock acquisitions ok')
    c.equal(c.value(acquisitions, kind='zk_mutex', outcome='ok'), ZK_MUTEXES, 'zk_mutex acquisitions ok')
    c.equal(c.value(acquisitions, kind='redlock', outcome='ok'), REDLOCKS, 'redlock acquisitions ok')
    c.equal(c.total(acquisitions), HOLDS, 'acquisitions of every kind and outcome (none failed)')
    c.equal(c.total('dlock_acquires_in_progress'), 0, 'acquires still in progress, all kinds')

    wait = 'dlock_acquire_wait_seconds'
    c.equal(c.value(wait + '_count', kind='redis_lock', outcome='ok'), REDIS_LOCKS, 'redis_lock waits observed')
    wait_sum = c.value(wait + '_sum', kind='redis_lock', outcome='ok')
    c.check(wait_sum is not None and wait_sum > 0, f'redis_lock waits: expected a positive sum, scraped {wait_sum}')

    c.equal(c.total('dlock_hold_seconds_count'), HOLDS, 'holds ended, all kinds')
    c.equal(c.value('dlock_hold_seconds_count', kind='redis_lock', how='lost'), 1, 'redis_lock holds lost')
    c.equal(c.total('dlock_losses_total'), 1, 'losses, all kinds and reasons')
    c.equal(c.value('dlock_losses_total', kind='redis_lock', reason='lost'), 1, 'redis_lock losses, reason lost')

    for master in first_masters(3):
        yes = c.value('dlock_redlock_votes_total', master=master, answer='yes')
        shown = 'nothing' if yes is None else f'{yes:g}'
        c.check(yes is not None and yes >= REDLOCKS, f'{master} voted yes: expected >= {REDLOCKS}, scraped {shown}')
        c.check(c.value('dlock_redis_reconnects_total', server=master) is not None,
                f'no dlock_redis_reconnects_total series for {master}')

    c.equal(c.value('dlock_queue_ops_total', op='offer', outcome='ok'), 1, 'queue offers ok')
    c.equal(c.value('dlock_queue_ops_total', op='take', outcome='ok'), 1, 'queue takes ok')
    c.equal(c.total('dlock_queue_ops_total'), 2, 'queue operations, all outcomes')
    c.equal(c.value('dlock_zk_session_connected'), 1, 'dlock_zk_session_connected')
    c.check(c.value('dlock_stalls_total') is not None, 'no dlock_stalls_total series')
    return c


def start(binary):
    """The example, and a queue of its stdout lines (None at EOF), echoed for the test log."""
    process = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lines = queue.Queue()

    def pump():
        for line in process.stdout:
            print(f'example: {line}', end='', flush=True)
            lines.put(line.rstrip('\n'))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return process, lines


def wait_until_driven(lines):
    """The metrics URL, once the example said "driven"."""
    deadline = time.monotonic() + DRIVEN_WITHIN
    url = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure(f'the example did not print "driven" within {DRIVEN_WITHIN} s')
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line is None:
            raise Failure('the example closed its stdout before printing "driven"')
        if line.startswith('metrics: '):
            url = line[len('metrics: '):].strip()
        elif line == 'driven':
            if url is None:
                raise Failure('the example printed "driven" but no "metrics: <url>" line before it')
            return url


def scrape(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read().decode()
    except OSError as e:  # urllib.error.URLError, timeouts, refused connections
        raise Failure(f'cannot fetch {url}: {e}') from e


def stop(process):
    """Closes the example's stdin; a failure message, or None when it exits 0 in time."""
    try:
        process.stdin.close()
    except OSError:
        pass  # it is gone already: its status tells
    try:
        status = process.wait(timeout=EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return f'the example did not exit within {EXIT_WITHIN} s of its stdin closing (killed)'
    return None if status == 0 else f'the example exited with status {status}'


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    process, lines = start(sys.argv[1])
    failures = []
    checked = 0
    try:
        url = wait_until_driven(lines)
        checks = check_figures(parse(scrape(url)))
        failures += checks.failures
        checked = checks.count
    except Failure as e:
        failures.append(str(e))
    finally:
        stopped = stop(process)
        if stopped:
            failures.append(stopped)
    for failure in failures:
        print(f'prometheus_scrape: FAILED: {failure}', file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f'prometheus_scrape: {checked} checks passed, and the example exited 0')


if __name__ == '__main__':
    main()
