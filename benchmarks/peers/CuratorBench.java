// Apache Curator's InterProcessMutex through dlock's ZooKeeper lock scenarios
// (benchmarks/zk_mutex.cpp), written the way Curator's documentation shows:
// one CuratorFramework per session, an InterProcessMutex per contender,
// acquire() and release() on the contender's own thread (the recipe blocks).
//
//   java -cp <curator + zookeeper jars> CuratorBench SCENARIO HOSTS PATHS PER_PATH ROUNDS [SESSIONS]
//
// PATHS x PER_PATH contenders (threads) on PATHS lock paths, ROUNDS
// acquire+release each; contender i uses CuratorFramework i mod SESSIONS
// (default 1: one per process, as the documentation recommends; one per
// contender stands for contenders in separate processes, each with the
// CuratorFramework of its own). The latency is the acquire's, as dlock's. A warm-up
// of a quarter of the rounds runs first on other paths (the JIT compiles the
// recipe), then the measured run. Prints one JSON line in the format of
// benchmarks/common.hpp, plus peak_rss_kb (the JVM's VmHWM) and peer_version.
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench {
    public static void main(String[] args) throws Exception {
        if (args.length != 5 && args.length != 6) {
            System.err.println("usage: CuratorBench SCENARIO HOSTS PATHS PER_PATH ROUNDS [SESSIONS]");
            System.exit(2);
        }
        String scenario = args[0], hosts = args[1];
        int paths = Integer.parseInt(args[2]), perPath = Integer.parseInt(args[3]), rounds = Integer.parseInt(args[4]);
        int sessions = args.length == 6 ? Integer.parseInt(args[5]) : 1;
        String root = "/dlock-peer-curator-" + ProcessHandle.current().pid();
        List<CuratorFramework> clients = new ArrayList<>();
        try {
            for (int i = 0; i < sessions; ++i) clients.add(connect(hosts));
            run(clients, root + "/warm", paths, perPath, Math.max(20, rounds / 4));
            long cpuBefore = processCpuNanos();
            long started = System.nanoTime();
            long[] latencies = run(clients, root + "/" + scenario, paths, perPath, rounds);
            double seconds = (System.nanoTime() - started) / 1e9;
            double cpuUs = (processCpuNanos() - cpuBefore) / 1e3;
            print(scenario, latencies, seconds, cpuUs);
        } finally {
            for (CuratorFramework client : clients) client.close();
        }
        System.exit(0);  // whatever Curator's or ZooKeeper's threads still do after close
    }

    /** A started CuratorFramework (a session of its own), as the documentation makes one. */
    static CuratorFramework connect(String hosts) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(hosts, new ExponentialBackoffRetry(1000, 3));
        client.start();
        client.blockUntilConnected();
        return client;
    }

    /** Runs every contender to the end; returns every acquire latency, in nanoseconds. */
    static long[] run(List<CuratorFramework> clients, String base, int paths, int perPath, int rounds)
            throws Exception {
        List<Thread> threads = new ArrayList<>();
        long[][] perThread = new long[paths * perPath][];
        Throwable[] failure = new Throwable[1];
        for (int p = 0; p < paths; ++p) {
            for (int c = 0; c < perPath; ++c) {
                int index = p * perPath + c;
                CuratorFramework client = clients.get(index % clients.size());
                InterProcessMutex mutex = new InterProcessMutex(client, base + "/lock-" + p);
                long[] mine = perThread[index] = new long[rounds];
                threads.add(new Thread(() -> {
                    try {
                        for (int i = 0; i < rounds; ++i) {
                            long t0 = System.nanoTime();
                            mutex.acquire();
                            mine[i] = System.nanoTime() - t0;
                            mutex.release();
                        }
                    } catch (Throwable e) {
                        synchronized (failure) { failure[0] = e; }
                    }
                }));
            }
        }
        for (Thread t : threads) t.start();
        for (Thread t : threads) t.join();
        if (failure[0] != null) throw new RuntimeException("contender failed", failure[0]);
        return Arrays.stream(perThread).flatMapToLong(Arrays::stream).toArray();
    }

    static long processCpuNanos() {
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        return os.getProcessCpuTime();
    }

    /** VmHWM: the peak resident set size, as getrusage's ru_maxrss reports it. */
    static long peakRssKb() throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status")))
            if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
        return 0;
    }

    static String version() throws Exception {
        Properties p = new Properties();
        try (InputStream in = InterProcessMutex.class.getResourceAsStream(
                "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            if (in != null) p.load(in);
        }
        String zk = org.apache.zookeeper.Version.getFullVersion().split("[ -]")[0];
        return "curator-recipes " + p.getProperty("version", "?") + ", zookeeper client " + zk + ", java "
            + System.getProperty("java.version");
    }

    /** The same index rule as benchmarks/common.hpp's percentile. */
    static double percentileUs(long[] sorted, double q) {
        if (sorted.length == 0) return 0;
        int index = (int) (q * (sorted.length - 1) + 0.5);
        return sorted[Math.min(index, sorted.length - 1)] / 1e3;
    }

    static void print(String scenario, long[] latencies, double seconds, double cpuUs) throws Exception {
        Arrays.sort(latencies);
        long ops = latencies.length;
        System.out.printf(java.util.Locale.ROOT,
            "{\"bench\":\"%s\",\"impl\":\"curator\",\"ops\":%d,\"seconds\":%.3f,\"ops_per_s\":%.3f,"
                + "\"p50_us\":%.3f,\"p99_us\":%.3f,\"cpu_us_per_op\":%.3f,\"peak_rss_kb\":%d,\"peer_version\":\"%s\"}%n",
            scenario, ops, seconds, ops / seconds, percentileUs(latencies, 0.5), percentileUs(latencies, 0.99),
            cpuUs / ops, peakRssKb(), version());
    }
}
