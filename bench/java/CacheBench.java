// CacheBench — Curator 5.4's side of the cache and persistent-node benchmark (bench/cache.sh):
// CuratorCache (persistent recursive watches on this 3.8 server) and PersistentNode, with the
// command line and output of bench/cache_bench.cpp (zkr's side):
//
//   CacheBench SCENARIO CONNECT PATH [--nodes N] [--events K] [--expire-via CONNECT]
//
//   event-latency, init, node-back: as zkr_cache_bench. init's bytes_per_node is the heap in use
//   (after two System.gc()) before and after, over the nodes cached. resync is zkr's only:
//   CuratorCache sends no initialized event after a rebuild, so its end cannot be timed alike.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.BackgroundCallback;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

final class CacheBench {
    private CacheBench() {
    }

    static String scenario, connect, path, expireVia;
    static int nodes = 100, events = 200;

    static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(connect).sessionTimeoutMs(10000)
                .connectionTimeoutMs(15000).retryPolicy(new RetryNTimes(10, 100)).build();
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to " + connect);
        }
        return c;
    }

    static List<String> layout(String path, int nodes) {
        List<String> out = new ArrayList<>();
        if (nodes <= 100) {
            for (int i = 0; i < nodes; i++) {
                out.add(path + "/c" + i);
            }
            return out;
        }
        for (int p = 0; out.size() < nodes; p++) {
            String parent = path + "/p" + p;
            out.add(parent);
            for (int c = 0; c < 99 && out.size() < nodes; c++) {
                out.add(parent + "/c" + c);
            }
        }
        return out;
    }

    /** Creates (or deletes, deepest first) the paths with at most 1,000 requests in flight. */
    static void apply(CuratorFramework c, List<String> paths, boolean create) throws Exception {
        for (int i = 0; i < paths.size(); i += 1000) {
            List<String> batch = paths.subList(i, Math.min(paths.size(), i + 1000));
            CountDownLatch done = new CountDownLatch(batch.size());
            BackgroundCallback cb = (cl, ev) -> done.countDown();
            for (String p : batch) {
                if (create) {
                    c.create().inBackground(cb).forPath(p, "d".getBytes(StandardCharsets.UTF_8));
                } else {
                    c.delete().inBackground(cb).forPath(p);
                }
            }
            if (!done.await(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("requests not answered within 120 s");
            }
        }
    }

    static void populate(CuratorFramework c, List<String> paths) throws Exception {
        c.create().creatingParentsIfNeeded().forPath(path, new byte[0]);
        apply(c, paths, true);
    }

    static void removeAll(CuratorFramework c, List<String> paths) throws Exception {
        List<String> reversed = new ArrayList<>(paths);
        Collections.reverse(reversed);
        apply(c, reversed, false);
        c.delete().quietly().forPath(path);
    }

    static long heapInUse() throws InterruptedException {
        Runtime r = Runtime.getRuntime();
        for (int i = 0; i < 2; i++) {
            System.gc();
            Thread.sleep(100);
        }
        return r.totalMemory() - r.freeMemory();
    }

    static double percentile(List<Double> xs, double q) {
        if (xs.isEmpty()) {
            return 0;
        }
        List<Double> s = new ArrayList<>(xs);
        Collections.sort(s);
        int i = (int) Math.min(s.size() - 1, Math.round(q * (s.size() - 1)));
        return s.get(i);
    }

    static String head() {
        return "{\"driver\":\"curator\",\"scenario\":\"" + scenario + "\",\"nodes\":" + nodes;
    }

    static void expire(CuratorFramework c) throws Exception {
        ZooKeeper zk = c.getZookeeperClient().getZooKeeper();
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper other = new ZooKeeper(expireVia, 10000, e -> {
            if (e.getState() == org.apache.zookeeper.Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        }, zk.getSessionId(), zk.getSessionPasswd());
        if (!connected.await(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("could not join the session to expire it");
        }
        other.close();
    }

    static int eventLatency() throws Exception {
        CuratorFramework c = client(connect);
        CuratorFramework writer = client(connect);
        List<String> paths = layout(path, nodes);
        populate(writer, paths);
        Object lock = new Object();
        String[] want = new String[2];
        boolean[] got = new boolean[1];
        CountDownLatch initialized = new CountDownLatch(1);
        CuratorCache cache = CuratorCache.build(c, path);
        cache.listenable().addListener(CuratorCacheListener.builder().forChanges((before, after) -> {
            synchronized (lock) {
                if (after.getPath().equals(want[0]) && new String(after.getData(), StandardCharsets.UTF_8).equals(want[1])) {
                    got[0] = true;
                    lock.notifyAll();
                }
            }
        }).forInitialized(initialized::countDown).build());
        cache.start();
        if (!initialized.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the cache was not initialized within 60 s");
        }
        List<Double> latencies = new ArrayList<>();
        for (int k = 0; k < events; k++) {
            synchronized (lock) {
                want[0] = paths.get(k % paths.size());
                want[1] = "v" + k;
                got[0] = false;
            }
            long t0 = System.nanoTime();
            writer.setData().forPath(want[0], want[1].getBytes(StandardCharsets.UTF_8));
            synchronized (lock) {
                long deadline = t0 + 10_000_000_000L;
                while (!got[0]) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        throw new IllegalStateException("no event for " + want[0] + " within 10 s");
                    }
                    lock.wait(Math.max(1, left / 1_000_000));
                }
            }
            latencies.add((System.nanoTime() - t0) / 1000.0);
        }
        cache.close();
        removeAll(writer, paths);
        System.out.println(head() + ",\"events\":" + events + ",\"p50_us\":" + percentile(latencies, 0.5) + ",\"p99_us\":"
                + percentile(latencies, 0.99) + "}");
        c.close();
        writer.close();
        return 0;
    }

    static int init() throws Exception {
        CuratorFramework c = client(connect);
        CuratorFramework writer = client(connect);
        List<String> paths = layout(path, nodes);
        populate(writer, paths);
        long before = heapInUse();
        long t0 = System.nanoTime();
        CountDownLatch initialized = new CountDownLatch(1);
        CuratorCache cache = CuratorCache.build(c, path);
        cache.listenable().addListener(CuratorCacheListener.builder().forInitialized(initialized::countDown).build());
        cache.start();
        if (!initialized.await(300, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the cache was not initialized within 300 s");
        }
        double initMs = (System.nanoTime() - t0) / 1e6;
        long after = heapInUse();
        if (cache.size() != paths.size() + 1) {
            throw new IllegalStateException("the cache holds " + cache.size() + " nodes");
        }
        System.out.println(head() + ",\"init_ms\":" + initMs + ",\"bytes_per_node\":" + (double) (after - before) / (paths.size() + 1) + "}");
        cache.close();
        removeAll(writer, paths);
        c.close();
        writer.close();
        return 0;
    }

    static int nodeBack() throws Exception {
        CuratorFramework c = client(connect);
        CuratorFramework observer = client(connect);
        observer.create().creatingParentsIfNeeded().forPath(path, new byte[0]);
        String node = path + "/node";
        PersistentNode pn = new PersistentNode(c, CreateMode.EPHEMERAL, false, node, "payload".getBytes(StandardCharsets.UTF_8));
        pn.start();
        if (!pn.waitForInitialCreate(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the node was not made within 30 s");
        }
        long oldOwner = observer.checkExists().forPath(node).getEphemeralOwner();
        long t0 = System.nanoTime();
        expire(c);
        long deadline = t0 + 60_000_000_000L;
        for (;;) {
            CountDownLatch changed = new CountDownLatch(1);
            Stat st = observer.checkExists().usingWatcher((org.apache.zookeeper.Watcher) e -> changed.countDown()).forPath(node);
            if (st != null && st.getEphemeralOwner() != oldOwner) {
                break;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0 || !changed.await(left, TimeUnit.NANOSECONDS)) {
                throw new IllegalStateException("the node was not back within 60 s");
            }
        }
        double backMs = (System.nanoTime() - t0) / 1e6;
        pn.close();
        observer.delete().quietly().forPath(path);
        System.out.println(head() + ",\"back_ms\":" + backMs + "}");
        c.close();
        observer.close();
        return 0;
    }

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "error");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        int code;
        try {
            if (args.length < 3) {
                throw new IllegalArgumentException("usage: CacheBench SCENARIO CONNECT PATH [--nodes N] [--events K] [--expire-via CONNECT]");
            }
            scenario = args[0];
            connect = args[1];
            path = args[2];
            expireVia = connect;
            for (int i = 3; i + 1 < args.length; i += 2) {
                switch (args[i]) {
                    case "--nodes": nodes = Integer.parseInt(args[i + 1]); break;
                    case "--events": events = Integer.parseInt(args[i + 1]); break;
                    case "--expire-via": expireVia = args[i + 1]; break;
                    default: throw new IllegalArgumentException("unknown option " + args[i]);
                }
            }
            switch (scenario) {
                case "event-latency": code = eventLatency(); break;
                case "init": code = init(); break;
                case "node-back": code = nodeBack(); break;
                default: throw new IllegalArgumentException("unknown scenario " + scenario);
            }
        } catch (Throwable t) {
            System.err.println("CacheBench: " + t);
            t.printStackTrace(System.err);
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }
}
