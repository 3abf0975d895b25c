// A Curator InterProcessSemaphoreV2 fleet for dlock's semaphore interop test,
// run with the JDK's source launcher:
//   java -cp <curator + zookeeper jars> CuratorSemaphoreContender.java HOSTS PATH MAX ROUNDS
// Two contender threads, each with its own semaphore object. Each round takes
// one lease, then creates one ephemeral-sequential
// marker "c-" per lease under PATH-inside (dlock's contenders create "m-"
// ones while they hold) and lists them: more than MAX markers means the
// mixed fleet held more than MAX leases at once.
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;

public class CuratorSemaphoreContender {
    static void contend(CuratorFramework client, String path, int max, int rounds) throws Exception {
        String inside = path + "-inside";
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, max);
        for (int i = 0; i < rounds; ++i) {
            // One lease: Curator takes several one mutex hold each, keeping the
            // first while it queues for the next, which can deadlock against
            // any acquirer that waits for several under the mutex.
            int qty = 1;
            Collection<Lease> leases = semaphore.acquire(qty);
            List<String> markers = new ArrayList<>();
            for (int k = 0; k < qty; ++k)
                markers.add(client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(inside + "/c-"));
            int holding = client.getChildren().forPath(inside).size();
            if (holding > max) {
                System.out.println("OVERFULL " + holding);
                System.exit(2);
            }
            Thread.sleep(3);
            for (String m : markers) client.delete().forPath(m);
            semaphore.returnAll(leases);
        }
    }

    public static void main(String[] args) throws Exception {
        String hosts = args[0], path = args[1];
        int max = Integer.parseInt(args[2]);
        int rounds = Integer.parseInt(args[3]);
        AtomicInteger failures = new AtomicInteger();
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(hosts, new ExponentialBackoffRetry(100, 5))) {
            client.start();
            client.blockUntilConnected();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 2; ++t) {
                Thread thread = new Thread(() -> {
                    try {
                        contend(client, path, max, rounds);
                    } catch (Exception e) {
                        e.printStackTrace(System.out);
                        failures.incrementAndGet();
                    }
                });
                thread.start();
                threads.add(thread);
            }
            for (Thread thread : threads) thread.join();
        }
        if (failures.get() != 0) System.exit(3);
        System.out.println("DONE " + rounds);
    }
}
