// A Curator contender for dlock's interop test, run with the JDK's source
// launcher: java -cp <curator + zookeeper jars> CuratorContender.java HOSTS PATH KIND ROUNDS
// KIND: mutex (InterProcessMutex) or write (InterProcessReadWriteLock's write lock).
// Inside each hold it creates the ephemeral node PATH-inside, which dlock
// creates too while it holds: a NODEEXISTS there means both held at once.
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorContender {
    public static void main(String[] args) throws Exception {
        String hosts = args[0], path = args[1], kind = args[2];
        int rounds = Integer.parseInt(args[3]);
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(hosts, new ExponentialBackoffRetry(100, 5))) {
            client.start();
            client.blockUntilConnected();
            InterProcessLock lock = kind.equals("mutex") ? new InterProcessMutex(client, path)
                                                         : new InterProcessReadWriteLock(client, path).writeLock();
            for (int i = 0; i < rounds; ++i) {
                lock.acquire();
                try {
                    client.create().withMode(CreateMode.EPHEMERAL).forPath(path + "-inside");
                } catch (KeeperException.NodeExistsException e) {
                    System.out.println("OVERLAP");
                    System.exit(2);
                }
                Thread.sleep(5);
                client.delete().forPath(path + "-inside");
                lock.release();
            }
            System.out.println("DONE " + rounds);
        }
    }
}
