// RecipeBench — CuratorBench's recipe scenarios (leader latch, semaphore, deep mutex queues):
// Curator 5.4's side of the benchmarks of zkr's election and semaphore recipes. Called from
// CuratorBench.run; same command line and one JSON line on stdout (see bench/java/README.md).

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.data.Stat;

final class RecipeBench {
    private RecipeBench() {
    }

    /**
     * The client's limit on a reply: jute.maxbuffer if set, else
     * ZKClientConfig.CLIENT_MAX_PACKET_LENGTH_DEFAULT (1048575).
     */
    static final int CLIENT_MAX_PACKET = Integer.getInteger("jute.maxbuffer", 1048575);

    /** The fewest Curator lock nodes whose listing the client refuses (see listingBytes). */
    static int refusedQueue() {
        long perChild = listingBytes(null, null, 1) - listingBytes(null, null, 0);
        long fixed = listingBytes(null, null, 0);
        return (int) ((CLIENT_MAX_PACKET - fixed + perChild - 1) / perChild);
    }

    /** Children of `path` from its Stat (no listing: works however long the listing would be); 0 if missing. */
    static int numChildren(CuratorFramework c, String path) throws Exception {
        return numChildren(c, path, false);
    }

    /** numChildren; `harness`: count the request as the benchmark's own. */
    static int numChildren(CuratorFramework c, String path, boolean harness) throws Exception {
        if (harness) {
            CuratorBench.noteHarness();
        }
        Stat st = c.checkExists().forPath(path);
        return st == null ? 0 : st.getNumChildren();
    }

    static void waitForChildren(CuratorFramework c, String path, int n, long timeoutMs, String what) throws Exception {
        waitForChildren(c, path, n, timeoutMs, what, false);
    }

    static void waitForChildren(CuratorFramework c, String path, int n, long timeoutMs, String what, boolean harness)
            throws Exception {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (numChildren(c, path, harness) != n) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(what + ": " + path + " has " + numChildren(c, path) + " children, expected " + n);
            }
            Thread.sleep(1);
        }
    }

    /**
     * Requests one server ("host:port") has received so far (mntr zk_packets_received, every
     * session's; a request sent to a follower is counted there, not again on the leader); -1 if it
     * does not answer.
     */
    static long serverPackets(String server) {
        try {
            for (String line : CuratorBench.fourLetterAt(server, "mntr").split("\n")) {
                String[] kv = line.split("\t");
                if (kv.length == 2 && kv[0].equals("zk_packets_received")) {
                    return Long.parseLong(kv[1].trim());
                }
            }
        } catch (Exception e) {
            // fall through
        }
        return -1;
    }

    /**
     * Samples the process's CPU time, each server's requests (--mntr-servers), their processes' CPU
     * (--server-pids), the cycles ended and the harness's requests (CuratorBench.cyclesDone,
     * harnessSent) at the window's start and end, on a thread of its own. The servers are asked one
     * after the other: each server's requests are divided by the cycles that ended between its own
     * two answers.
     */
    static final class CpuWindow {
        final double[] cpu = {Double.NaN, Double.NaN};
        final List<String> servers;
        final long[][] packets;  // [sample][server]
        final double[][] at;     // [sample][server]: the cycles ended when it answered
        final double[] serverCpu = {-1, -1};
        final double[] cycles = {0, 0};
        final double[] harness = {0, 0};
        final long t1;
        final Thread sampler;

        CpuWindow(CuratorBench.Options o, long t0, long t1) {
            this.t1 = t1;
            this.servers = CuratorBench.serversOf(o.mntrServers);
            this.packets = new long[2][servers.size()];
            this.at = new double[2][servers.size()];
            sampler = new Thread(() -> {
                try {
                    sample(o, 0); // once before: the first call's class loading must not stretch the sample at t0
                    CuratorBench.sleepUntil(t0);
                    sample(o, 0);
                    CuratorBench.sleepUntil(t1);
                    sample(o, 1);
                } catch (InterruptedException e) {
                    // leave NaN
                }
            }, "cpu-sampler");
            sampler.setDaemon(true);
            sampler.start();
        }

        private void sample(CuratorBench.Options o, int i) {
            // Counters read before and after a server's mntr: their mean is when it answered.
            long c0 = CuratorBench.cyclesDone.get(), h0 = CuratorBench.harnessSent.get();
            cpu[i] = CuratorBench.cpuSeconds();
            for (int s = 0; s < servers.size(); s++) {
                long before = CuratorBench.cyclesDone.get();
                packets[i][s] = serverPackets(servers.get(s));
                at[i][s] = (before + CuratorBench.cyclesDone.get()) / 2.0;
            }
            serverCpu[i] = o.serverPids.length == 0 ? -1 : CuratorBench.processesCpuSeconds(o.serverPids);
            cycles[i] = (c0 + CuratorBench.cyclesDone.get()) / 2.0;
            harness[i] = (h0 + CuratorBench.harnessSent.get()) / 2.0;
        }

        /** Waits for the window's end (and its samples), 20 s at most after it. */
        private void join() throws InterruptedException {
            sampler.join(Math.max(1, (t1 - System.nanoTime()) / 1_000_000 + 20_000));
        }

        double seconds() throws InterruptedException {
            join();
            return cpu[1] - cpu[0];
        }

        CuratorBench.ServerCost cost() throws InterruptedException {
            join();
            CuratorBench.ServerCost c = new CuratorBench.ServerCost();
            c.harness = harness[1] - harness[0];
            c.cycles = cycles[1] - cycles[0];
            double perCycle = 0;
            for (int s = 0; s < servers.size(); s++) {
                double n = at[1][s] - at[0][s];
                if (packets[0][s] < 0 || packets[1][s] < 0 || n <= 0) {
                    return c;
                }
                // A four-letter word counts as a packet too: less the end sample's own mntr.
                perCycle += (packets[1][s] - packets[0][s] - 1) / n;
            }
            c.requestsPerCycle = perCycle;
            if (serverCpu[0] >= 0 && serverCpu[1] >= 0) {
                c.cpuS = serverCpu[1] - serverCpu[0];
            }
            return c;
        }
    }

    static CuratorBench.Json latencyJson(CuratorBench.Json j, String prefix, long[] ns) {
        long[] sorted = ns.clone();
        Arrays.sort(sorted);
        double sum = 0;
        for (long v : ns) {
            sum += v;
        }
        j.num(prefix + "_p50_us", CuratorBench.percentileUs(sorted, 0.5)).num(prefix + "_p99_us", CuratorBench.percentileUs(sorted, 0.99));
        j.num(prefix + "_max_us", CuratorBench.percentileUs(sorted, 1.0));
        j.num(prefix + "_mean_us", ns.length == 0 ? Double.NaN : sum / ns.length / 1e3);
        return j;
    }

    static void print(String line) {
        System.out.println(line);
        System.out.flush();
    }

    // ------------------------------------------------------------------ latch-handoff

    /**
     * Rounds of N latches on one path (one client): all join, the followers' watches are set, then
     * each leader in turn closes (SILENT); the hand-off is close() -> the next latch's isLeader.
     * Hand-offs whose close() falls inside the measured window count.
     */
    static int latchHandoff(CuratorBench.Options o, CuratorFramework client) throws Exception {
        int n = o.waiters;
        long[] w = CuratorBench.window(o);
        long t0 = w[0], t1 = w[1];
        CpuWindow cpu = new CpuWindow(o, t0, t1);
        CuratorBench.LongList lat = new CuratorBench.LongList();
        int rounds = 0;
        String error = null;
        boolean watchCount = true;
        try {
            while (System.nanoTime() < t1) {
                boolean measured = false;
                BlockingQueue<Integer> leaders = new LinkedBlockingQueue<>();
                long[] leaderAt = new long[n];
                LeaderLatch[] latches = new LeaderLatch[n];
                for (int i = 0; i < n; i++) {
                    final int id = i;
                    latches[i] = new LeaderLatch(client, o.path, "latch-" + i);
                    latches[i].addListener(new LeaderLatchListener() {
                        @Override
                        public void isLeader() {
                            leaderAt[id] = System.nanoTime();
                            leaders.add(id);
                        }

                        @Override
                        public void notLeader() {
                        }
                    });
                    latches[i].start();
                }
                // --settle-ms: give the joins (and the followers' watches) that long, then check
                // the joins with as few polls as may be; no 4lw in the window.
                if (o.settleMs >= 0) {
                    Thread.sleep(o.settleMs);
                }
                waitForChildren(client, o.path, n, 60_000, "latches joining", true);
                // Every follower watches its predecessor (a data watch each) before the chain starts.
                if (watchCount && o.settleMs < 0) {
                    long deadline = System.nanoTime() + 2_000_000_000L;
                    try {
                        while (CuratorBench.serverWatchesAll(o.mntrServers) < n - 1 && System.nanoTime() < deadline) {
                            Thread.sleep(1);
                        }
                    } catch (Exception e) {
                        watchCount = false; // no wchs on this server: go on without
                    }
                }
                Integer cur = leaders.poll(30, TimeUnit.SECONDS);
                if (cur == null) {
                    throw new IllegalStateException("latch-handoff: no leader within 30 s");
                }
                for (int closed = 1;; closed++) {
                    long tc = System.nanoTime();
                    latches[cur].close();
                    if (closed == n) {
                        break;
                    }
                    Integer next = leaders.poll(30, TimeUnit.SECONDS);
                    if (next == null) {
                        throw new IllegalStateException("latch-handoff: no isLeader within 30 s of close() " + closed);
                    }
                    long d = leaderAt[next] - tc;
                    if (d < 0) {
                        throw new IllegalStateException("latch-handoff: latch " + next + " led before the leader closed");
                    }
                    if (!leaders.isEmpty()) {
                        throw new IllegalStateException("latch-handoff: two isLeader calls after one close()");
                    }
                    if (tc >= t0 && tc <= t1) {
                        lat.add(d);
                        measured = true;
                    }
                    cur = next;
                }
                waitForChildren(client, o.path, 0, 30_000, "latches leaving", true);
                CuratorBench.noteCycles(n - 1); // the round's hand-offs, its requests all sent
                if (measured) {
                    rounds++; // rounds with a hand-off in the window
                }
            }
        } catch (Exception e) {
            error = e.toString();
        }
        long[] ns = Arrays.copyOf(lat.a, lat.n);
        CuratorBench.Json j = new CuratorBench.Json().str("driver", o.driver).str("scenario", o.scenario).integer("latches", n);
        j.num("seconds", o.seconds).integer("rounds", rounds).integer("handoffs", ns.length);
        latencyJson(j, "handoff", ns);
        double cpuS = cpu.seconds();
        j.num("cpu_s", cpuS).num("cpu_ms_per_handoff", ns.length == 0 ? Double.NaN : cpuS * 1e3 / ns.length);
        CuratorBench.addServerCost(j, cpu.cost()); // a cycle: a hand-off (and its round's share)
        j.integer("rss_kb", CuratorBench.peakRssKb()).integer("errors", error == null ? 0 : 1);
        if (error != null) {
            j.str("error", error);
        }
        print(j.done());
        return error == null ? 0 : 1;
    }

    // ------------------------------------------------------------------ latch-join

    /**
     * One latch at a time on one path: start() -> isLeader is the measured latency; then close()
     * and wait for the node's deletion (a watch) before the next cycle, so each join is
     * uncontended. cycles_per_s counts whole cycles (join + close + deletion seen).
     */
    static int latchJoin(CuratorBench.Options o, CuratorFramework client) throws Exception {
        long[] w = CuratorBench.window(o);
        long t0 = w[0], t1 = w[1];
        CpuWindow cpu = new CpuWindow(o, t0, t1);
        CuratorBench.LongList lat = new CuratorBench.LongList();
        CuratorBench.RunResult r = new CuratorBench.RunResult();
        try {
            while (System.nanoTime() < t1) {
                LeaderLatch latch = new LeaderLatch(client, o.path, "join");
                CountDownLatch led = new CountDownLatch(1);
                AtomicLong ledAt = new AtomicLong();
                latch.addListener(new LeaderLatchListener() {
                    @Override
                    public void isLeader() {
                        ledAt.set(System.nanoTime());
                        led.countDown();
                    }

                    @Override
                    public void notLeader() {
                    }
                });
                long s = System.nanoTime();
                latch.start();
                if (!led.await(30, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("an uncontended latch did not lead within 30 s");
                }
                long e = ledAt.get();
                String ours = latch.getOurPath();
                CountDownLatch gone = new CountDownLatch(1);
                Watcher watcher = (WatchedEvent ev) -> {
                    if (ev.getType() == Watcher.Event.EventType.NodeDeleted) {
                        gone.countDown();
                    }
                };
                if (ours != null) {
                    CuratorBench.noteHarness();
                }
                Stat st = ours == null ? null : client.checkExists().usingWatcher(watcher).forPath(ours);
                latch.close();
                if (st != null && !gone.await(30, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("the closed latch's node " + ours + " was not deleted within 30 s");
                }
                if (e >= t0 && e <= t1) {
                    lat.add(e - s);
                }
                CuratorBench.noteCycles(1); // join + close + deletion seen
            }
        } catch (Exception e) {
            r.errors = 1;
            r.firstError = e.toString();
        }
        r.latencies = Arrays.copyOf(lat.a, lat.n);
        r.cpuS = cpu.seconds();
        r.server = cpu.cost();
        print(CuratorBench.finishTimed(o, r));
        return r.errors == 0 ? 0 : 1;
    }

    // ------------------------------------------------------------------ semaphore

    /**
     * sem-uncontended (1 thread) and sem-contended (--threads): each thread its own
     * InterProcessSemaphoreV2(PATH, --max) on the one client; a cycle is acquire() + returnLease();
     * the process checks that no more than --max leases are held at once.
     */
    static int semaphore(CuratorBench.Options o, CuratorFramework client) throws Exception {
        InterProcessSemaphoreV2[] sems = new InterProcessSemaphoreV2[o.threads];
        AtomicInteger holders = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        long[] w = CuratorBench.window(o); // runThreads's window, give or take microseconds
        // acquire() alone, per thread: latencies of the acquisitions that ended in the window.
        CuratorBench.LongList[] acquires = new CuratorBench.LongList[o.threads];
        for (int i = 0; i < o.threads; i++) {
            acquires[i] = new CuratorBench.LongList();
        }
        CuratorBench.RunResult r = CuratorBench.runThreads(o, id -> sems[id] = new InterProcessSemaphoreV2(client, o.path, o.max),
                (id, rng) -> {
                    long a0 = System.nanoTime();
                    Lease lease = sems[id].acquire();
                    long a1 = System.nanoTime();
                    if (a1 >= w[0] && a1 <= w[1]) {
                        acquires[id].add(a1 - a0);
                    }
                    int h = holders.incrementAndGet();
                    most.accumulateAndGet(h, Math::max);
                    if (h > o.max) {
                        throw new IllegalStateException(h + " leases held at once, max " + o.max);
                    }
                    holders.decrementAndGet();
                    sems[id].returnLease(lease);
                });
        if (r.errors == 0 && o.startAtMs == null) {
            for (String sub : new String[] {"/leases", "/locks"}) {
                int left = CuratorBench.childCount(client, o.path + sub);
                if (left != 0) {
                    r.errors++;
                    r.firstError = left + " node(s) left under " + o.path + sub + " after the run";
                }
            }
        }
        String line = CuratorBench.finishTimed(o, r);
        // Append the semaphore's own fields.
        CuratorBench.LongList all = new CuratorBench.LongList();
        for (CuratorBench.LongList l : acquires) {
            for (int i = 0; i < l.n; i++) {
                all.add(l.a[i]);
            }
        }
        long[] acq = Arrays.copyOf(all.a, all.n);
        Arrays.sort(acq);
        String acquireFields = String.format(java.util.Locale.ROOT, ", \"acquire_p50_us\": %.6g, \"acquire_p99_us\": %.6g",
                CuratorBench.percentileUs(acq, 0.5), CuratorBench.percentileUs(acq, 0.99));
        print(line.substring(0, line.length() - 1) + ", \"max_leases\": " + o.max + ", \"most_held\": " + most.get()
                + acquireFields + "}");
        if (o.startAtMs == null) {
            CuratorBench.deleteQuietly(client, o.path + "/leases");
            CuratorBench.deleteQuietly(client, o.path + "/locks");
            CuratorBench.deleteQuietly(client, o.path);
        }
        return r.errors == 0 ? 0 : 1;
    }

    // ------------------------------------------------------------------ queue-depth

    /**
     * A holder, then --waiters threads queued on one InterProcessMutex (one client), each
     * releasing as soon as it is granted. Reports the time per hand-off; if a waiter fails (e.g.
     * Curator's client refusing a listing over 1 MiB), the queue length then and the error.
     */
    static int queueDepth(CuratorBench.Options o, CuratorFramework client) throws Exception {
        // The queue is watched from a second client: once the waiters' client fails (every
        // listing too long for it drops its connection), nothing else gets through on it.
        CuratorFramework monitor = CuratorFrameworkFactory.newClient(o.connect, 10_000, 10_000, new RetryNTimes(3, 500));
        monitor.start();
        try {
            if (!monitor.blockUntilConnected(15, TimeUnit.SECONDS)) {
                throw new IllegalStateException("monitor client: not connected to " + o.connect);
            }
            return queueDepth(o, client, monitor);
        } finally {
            monitor.close();
        }
    }

    static int queueDepth(CuratorBench.Options o, CuratorFramework client, CuratorFramework monitor) throws Exception {
        int n = o.waiters;
        InterProcessMutex holder = new InterProcessMutex(client, o.path);
        holder.acquire();
        AtomicLong releaseNs = new AtomicLong();
        AtomicInteger order = new AtomicInteger();
        long[] handoff = new long[n];
        AtomicReference<String> failure = new AtomicReference<>();
        AtomicLong failedAtNs = new AtomicLong();
        CountDownLatch done = new CountDownLatch(n);
        long q0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            Thread t = new Thread(null, () -> {
                try {
                    InterProcessMutex m = new InterProcessMutex(client, o.path);
                    if (!m.acquire(3600, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("not granted within an hour");
                    }
                    long got = System.nanoTime();
                    handoff[order.getAndIncrement()] = got - releaseNs.get();
                    releaseNs.set(System.nanoTime());
                    m.release();
                } catch (Exception e) {
                    if (failure.compareAndSet(null, e.toString())) {
                        failedAtNs.set(System.nanoTime());
                    }
                } finally {
                    done.countDown();
                }
            }, "waiter-" + i, 256 * 1024);
            t.setDaemon(true);
            t.start();
        }
        // Queueing: every waiter's node is there (or one failed).
        int queued = 0;
        long deadline = System.nanoTime() + 1800_000_000_000L;
        while ((queued = numChildren(monitor, o.path)) < n + 1 && failure.get() == null) {
            if (System.nanoTime() > deadline) {
                failure.compareAndSet(null, "the waiters did not queue within 30 min");
                break;
            }
            Thread.sleep(20);
        }
        double queueS = (System.nanoTime() - q0) / 1e9;
        CuratorBench.Json j = new CuratorBench.Json().str("driver", o.driver).str("scenario", o.scenario).integer("waiters", n);
        if (failure.get() != null) {
            // The failure point: the queue's length (from the parent's Stat: no listing needed).
            int at = numChildren(monitor, o.path);
            j.integer("handoffs", 0).num("queue_s", queueS).integer("queued_at_failure", at);
            j.integer("listing_bytes_at_failure", listingBytes(monitor, o.path, at));
            j.integer("client_max_packet", CLIENT_MAX_PACKET).integer("refused_queue_computed", refusedQueue());
            j.num("failed_after_s", (failedAtNs.get() - q0) / 1e9);
            j.integer("rss_kb", CuratorBench.peakRssKb()).integer("errors", 1).str("error", failure.get());
            print(j.done());
            return 1;
        }
        long watches = -1;
        try {
            long watchDeadline = System.nanoTime() + 10_000_000_000L;
            while ((watches = CuratorBench.serverWatches(o.connect)) < n && System.nanoTime() < watchDeadline) {
                Thread.sleep(20);
            }
        } catch (Exception e) {
            watches = -1;
        }
        long c0 = System.nanoTime();
        releaseNs.set(c0);
        holder.release();
        if (!done.await(3600, TimeUnit.SECONDS)) {
            failure.compareAndSet(null, "the chain did not finish within an hour");
        }
        double chainS = (System.nanoTime() - c0) / 1e9;
        int handoffs = order.get();
        j.integer("handoffs", handoffs).num("queue_s", queueS).num("chain_s", chainS);
        j.num("per_handoff_us", handoffs == 0 ? Double.NaN : chainS * 1e6 / handoffs);
        long[] ns = Arrays.copyOf(handoff, handoffs);
        latencyJson(j, "handoff", ns);
        int tenth = Math.max(1, handoffs / 10);
        if (handoffs >= tenth) {
            double first = 0, last = 0;
            for (int i = 0; i < tenth; i++) {
                first += ns[i];
                last += ns[handoffs - 1 - i];
            }
            j.num("handoff_first_tenth_us", first / tenth / 1e3).num("handoff_last_tenth_us", last / tenth / 1e3);
        }
        j.integer("server_watches_queued", watches);
        j.integer("listing_bytes_full_queue", listingBytes(monitor, o.path, n + 1));
        j.integer("rss_kb", CuratorBench.peakRssKb());
        if (failure.get() != null) {
            j.integer("errors", 1).str("error", failure.get());
        } else {
            int left = numChildren(monitor, o.path);
            j.integer("errors", left == 0 ? 0 : 1);
            if (left != 0) {
                j.str("error", left + " node(s) left under " + o.path);
            }
        }
        print(j.done());
        CuratorBench.deleteQuietly(client, o.path);
        return failure.get() == null ? 0 : 1;
    }

    /**
     * The size of the reply to Curator's listing of `count` lock nodes: the reply header (xid,
     * zxid, err: 16 bytes), the vector's length, a length + the name per child, and a Stat (68
     * bytes: Curator lists with getChildren2 even when it asks for no Stat). The 4-byte frame
     * length is not included: the client refuses a reply whose rest is >= its limit (1048575).
     * Checked by queue-limit: 17770 nodes (1048518 bytes) list, 17771 (1048577) do not.
     */
    static long listingBytes(CuratorFramework c, String path, int count) {
        int name = "_c_".length() + 36 + "-lock-".length() + 10;
        return 16 + 4 + (long) count * (4 + name) + 68;
    }

    // ------------------------------------------------------------------ queue-limit

    /**
     * Adds Curator-named mutex contender nodes (_c_<uuid>-lock-<seq>, ephemeral sequential, in
     * batches of --step, pipelined) under PATH up to --waiters, and after each batch makes one
     * InterProcessMutex attempt (100 ms) from a second client, which lists PATH. At the first
     * failure, bisects between the last good and the failed length (deleting nodes) to find the
     * longest queue Curator can still list. The probe client retries once.
     */
    static int queueLimit(CuratorBench.Options o, CuratorFramework client) throws Exception {
        CuratorFramework probeClient = CuratorFrameworkFactory.newClient(o.connect, 10_000, 10_000, new RetryNTimes(1, 100));
        probeClient.start();
        List<String> nodes = new ArrayList<>();
        CuratorBench.Json j = new CuratorBench.Json().str("driver", o.driver).str("scenario", o.scenario);
        try {
            if (!probeClient.blockUntilConnected(15, TimeUnit.SECONDS)) {
                throw new IllegalStateException("probe client: not connected");
            }
            InterProcessMutex probe = new InterProcessMutex(probeClient, o.path);
            int good = 0;
            int bad = -1;
            String error = null;
            long t0 = System.nanoTime();
            while (nodes.size() < o.waiters) {
                add(client, o.path, nodes, Math.min(o.step, o.waiters - nodes.size()));
                String e = attempt(probe, client, o.path, nodes.size());
                if (e == null) {
                    good = nodes.size();
                } else {
                    bad = nodes.size();
                    error = e;
                    break;
                }
            }
            double fillS = (System.nanoTime() - t0) / 1e9;
            j.integer("step", o.step).integer("max_tried", nodes.size()).num("fill_s", fillS);
            if (bad < 0) {
                j.integer("limit_queue", -1).integer("longest_listed", good);
            } else {
                int coarseBad = bad;
                // Bisect: the longest queue (of our nodes; the probe's own node comes on top) that lists.
                while (bad - good > 1) {
                    int mid = (good + bad) / 2;
                    while (nodes.size() > mid) {
                        client.delete().forPath(nodes.remove(nodes.size() - 1));
                    }
                    add(client, o.path, nodes, mid - nodes.size());
                    String e = attempt(probe, client, o.path, mid);
                    if (e == null) {
                        good = mid;
                    } else {
                        bad = mid;
                        error = e;
                    }
                }
                j.integer("first_failure_coarse", coarseBad);
                // The probe's listing holds our nodes and its own.
                j.integer("longest_listed", good + 1).integer("limit_queue", bad + 1);
                j.integer("listing_bytes_longest", listingBytes(client, o.path, good + 1));
                j.integer("listing_bytes_refused", listingBytes(client, o.path, bad + 1));
                j.str("error", error);
            }
            j.integer("client_max_packet", CLIENT_MAX_PACKET).integer("refused_queue_computed", refusedQueue());
            j.integer("rss_kb", CuratorBench.peakRssKb()).integer("errors", 0);
            print(j.done());
            return 0;
        } catch (Exception e) {
            j.integer("errors", 1).str("error", e.toString());
            print(j.done());
            return 1;
        } finally {
            probeClient.close();
        }
    }

    /** Creates `count` Curator-named contender nodes under `path` in pipelined background creates. */
    static void add(CuratorFramework c, String path, List<String> nodes, int count) throws Exception {
        if (count <= 0) {
            return;
        }
        CountDownLatch done = new CountDownLatch(count);
        AtomicReference<String> failed = new AtomicReference<>();
        List<String> made = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < count; i++) {
            c.create().creatingParentContainersIfNeeded().withProtection().withMode(CreateMode.EPHEMERAL_SEQUENTIAL)
                    .inBackground((client, event) -> {
                        if (event.getResultCode() == KeeperException.Code.OK.intValue()) {
                            made.add(event.getName());
                        } else {
                            failed.compareAndSet(null, "create: " + KeeperException.Code.get(event.getResultCode()));
                        }
                        done.countDown();
                    }).forPath(path + "/lock-");
        }
        if (!done.await(300, TimeUnit.SECONDS)) {
            throw new IllegalStateException("creates not answered within 300 s");
        }
        if (failed.get() != null) {
            throw new IllegalStateException(failed.get());
        }
        nodes.addAll(made);
    }

    /** One probe attempt; null if it listed (and, as expected, did not get the lock), else the error. */
    static String attempt(InterProcessMutex probe, CuratorFramework client, String path, int expected) throws Exception {
        int have = numChildren(client, path);
        if (have != expected) {
            throw new IllegalStateException(path + " has " + have + " children, expected " + expected + " (a probe node left?)");
        }
        try {
            if (probe.acquire(100, TimeUnit.MILLISECONDS)) {
                probe.release();
                throw new IllegalStateException("the probe got the lock past " + expected + " contender nodes");
            }
            return null;
        } catch (IllegalStateException e) {
            throw e;
        } catch (Exception e) {
            // Wait for the probe's node to go (its session stays; Curator deletes it on failure).
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (numChildren(client, path) != expected && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            return e.toString();
        }
    }

    /** Loads the recipe classes (for the class-data-sharing archive); no server. */
    static void warmup(CuratorFramework c) {
        new LeaderLatch(c, "/warmup", "w").addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
            }

            @Override
            public void notLeader() {
            }
        });
        new InterProcessSemaphoreV2(c, "/warmup", 1);
        new LinkedBlockingQueue<Integer>().poll();
        new RetryNTimes(1, 100);
    }
}
