// CoordinationBench — Curator 5.4's side of the counter, barrier and id benchmark
// (bench/coordination.sh): DistributedAtomicLong with RetryNTimes(1000, 1) and DistributedBarrier,
// with the command line and output of bench/coordination_bench.cpp (zkr's side):
//
//   CoordinationBench SCENARIO CONNECT PATH [--clients N] [--seconds S] [--warmup S]
//                     [--releases K] [--block B] [--direct CONNECT]
//
//   inc      N clients (threads, each its own CuratorFramework and DistributedAtomicLong on
//            PATH/counter, retry policy RetryNTimes(1000, 1)) increment: as zkr_coordination_bench
//            (attempts_per_op: the AtomicValue's optimistic tries). The counter must hold the
//            successful increments.
//   barrier  N waiters (each its own client and DistributedBarrier) in waitOnBarrier(); another
//            client calls removeBarrier(): as zkr_coordination_bench.
//   ids      the id source is DistributedAtomicLong.increment(), one id per call (Curator has no
//            block allocator; --block is ignored).
//
// Compiled by bench/CMakeLists.txt (target zkr_coordination_bench_curator) against Debian's jars,
// run with the class path of bench/java/build.sh's driver.

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.retry.RetryNTimes;

final class CoordinationBench {
    private CoordinationBench() {
    }

    static String scenario, connect, path, direct;
    static int clients = 1, releases = 20;
    static double seconds = 3, warmup = 1;

    static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(connect).sessionTimeoutMs(10000)
                .connectionTimeoutMs(15000).retryPolicy(new RetryNTimes(10, 100)).build();
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to " + connect);
        }
        return c;
    }

    static String fourLetterWord(String word) throws Exception {
        String first = direct.split(",")[0];
        int colon = first.lastIndexOf(':');
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(first.substring(0, colon), Integer.parseInt(first.substring(colon + 1))), 3000);
            s.setSoTimeout(3000);
            OutputStream out = s.getOutputStream();
            out.write(word.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            ByteArrayOutputStream all = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            for (int n; (n = in.read(buf)) > 0;) {
                all.write(buf, 0, n);
            }
            return all.toString(StandardCharsets.UTF_8);
        }
    }

    static long packetsReceived() throws Exception {
        for (String line : fourLetterWord("mntr").split("\n")) {
            String[] kv = line.trim().split("\\s+");
            if (kv.length == 2 && kv[0].equals("zk_packets_received")) {
                return Long.parseLong(kv[1]);
            }
        }
        throw new IllegalStateException("no zk_packets_received in the server's mntr");
    }

    /** Sessions watching p (wchp lists each watched path, then its sessions indented). */
    static int watchersOf(String p) throws Exception {
        int n = 0;
        boolean inPath = false;
        for (String line : fourLetterWord("wchp").split("\n")) {
            if (line.startsWith("/")) {
                inPath = line.trim().equals(p);
            } else if (inPath && line.contains("0x")) {
                n++;
            }
        }
        return n;
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

    /** The median round trip of a read on c (checkExists of a path that need not exist), in ms. */
    static double rttMs(CuratorFramework c, String p) throws Exception {
        for (int i = 0; i < 5; i++) {
            c.checkExists().forPath(p);  // warm
        }
        List<Double> xs = new ArrayList<>();
        for (int i = 0; i < 21; i++) {
            long t0 = System.nanoTime();
            c.checkExists().forPath(p);
            xs.add((System.nanoTime() - t0) / 1e6);
        }
        return percentile(xs, 0.5);
    }

    static String head() {
        return "{\"driver\":\"curator\",\"scenario\":\"" + scenario + "\"";
    }

    static void sleepS(double s) throws InterruptedException {
        Thread.sleep((long) (s * 1000));
    }

    static void ensurePath(CuratorFramework c, String p) throws Exception {
        if (c.checkExists().forPath(p) == null) {
            c.create().creatingParentsIfNeeded().forPath(p, new byte[0]);
        }
    }

    static int inc() throws Exception {
        String counterPath = path + "/counter";
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            cs.add(client(connect));
        }
        ensurePath(cs.get(0), path);
        double rtt = rttMs(cs.get(0), path);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong ok = new AtomicLong(), failed = new AtomicLong();
        AtomicReference<Throwable> error = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        // Per client: each increment's end (ns), duration (ns), optimistic tries, success.
        List<long[][]> ops = new ArrayList<>();
        int[] counts = new int[clients];
        for (int i = 0; i < clients; i++) {
            final int me = i;
            long[][] mine = new long[][] {new long[1 << 16], new long[1 << 16], new long[1 << 16], new long[1 << 16]};
            ops.add(mine);
            DistributedAtomicLong counter = new DistributedAtomicLong(cs.get(i), counterPath, new RetryNTimes(1000, 1));
            Thread t = new Thread(() -> {
                long[][] m = ops.get(me);
                try {
                    while (!stop.get()) {
                        long s = System.nanoTime();
                        AtomicValue<Long> r = counter.increment();
                        long e = System.nanoTime();
                        int k = counts[me];
                        if (k == m[0].length) {
                            for (int j = 0; j < 4; j++) {
                                m[j] = java.util.Arrays.copyOf(m[j], k * 2);
                            }
                        }
                        m[0][k] = e;
                        m[1][k] = e - s;
                        m[2][k] = r.getStats().getOptimisticTries();
                        m[3][k] = r.succeeded() ? 1 : 0;
                        counts[me] = k + 1;
                        if (r.succeeded()) {
                            ok.incrementAndGet();
                        } else {
                            failed.incrementAndGet();
                        }
                    }
                } catch (Throwable e) {
                    error.compareAndSet(null, e);
                    stop.set(true);
                }
            });
            t.start();
            threads.add(t);
        }
        sleepS(warmup);
        long packets0 = packetsReceived();
        long t0 = System.nanoTime();
        sleepS(seconds);
        long t1 = System.nanoTime();
        long packets1 = packetsReceived();
        double window = (t1 - t0) / 1e9;
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        if (error.get() != null) {
            throw new IllegalStateException("an increment threw: " + error.get(), error.get());
        }
        long finalValue = new DistributedAtomicLong(cs.get(0), counterPath, new RetryNTimes(1000, 1)).get().postValue();
        long n = 0, attempts = 0, failedIn = 0, fewest = -1, active = 0;
        List<Double> latencies = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            long[][] m = ops.get(i);
            long own = 0;
            for (int k = 0; k < counts[i]; k++) {
                if (m[0][k] < t0) {
                    continue;
                }
                if (m[3][k] == 1) {
                    latencies.add(m[1][k] / 1e6);
                }
                if (m[0][k] > t1) {
                    continue;
                }
                if (m[3][k] == 1) {
                    own++;
                    attempts += m[2][k];
                } else {
                    failedIn++;
                }
            }
            n += own;
            active += own > 0 ? 1 : 0;
            fewest = fewest < 0 ? own : Math.min(fewest, own);
        }
        double opMs = n > 0 ? window * 1000 * clients / n : 0;
        System.out.println(head() + ",\"clients\":" + clients + ",\"seconds\":" + window + ",\"ops\":" + n + ",\"ops_per_s\":"
                + n / window + ",\"attempts_per_op\":" + (n > 0 ? (double) attempts / n : 0)
                + ",\"requests_per_op\":" + (n > 0 ? (double) (packets1 - packets0) / n : 0) + ",\"failed_ops\":" + failedIn
                + ",\"fewest_by_one_client\":" + fewest + ",\"clients_incrementing\":" + active + ",\"p50_op_ms\":"
                + percentile(latencies, 0.5) + ",\"p99_op_ms\":"
                + percentile(latencies, 0.99) + ",\"max_op_ms\":" + percentile(latencies, 1.0) + ",\"rtt_ms\":" + rtt
                + ",\"op_ms\":" + opMs + ",\"rtt_per_op\":" + (rtt > 0 ? opMs / rtt : 0) + ",\"total_ok\":" + ok.get()
                + ",\"total_failed\":" + failed.get() + ",\"final_value\":" + finalValue + ",\"counter_ok\":" + (finalValue == ok.get()) + "}");
        cs.get(0).delete().quietly().forPath(counterPath);
        cs.get(0).delete().quietly().forPath(path);
        for (CuratorFramework c : cs) {
            c.close();
        }
        if (finalValue != ok.get()) {
            System.err.println("CoordinationBench: the counter holds " + finalValue + " after " + ok.get() + " successful increments");
            return 1;
        }
        return 0;
    }

    static int barrier() throws Exception {
        String barrierPath = path + "/barrier";
        CuratorFramework controller = client(connect);
        ensurePath(controller, path);
        double rtt = rttMs(controller, path);
        DistributedBarrier gate = new DistributedBarrier(controller, barrierPath);
        List<CuratorFramework> cs = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            cs.add(client(connect));
        }
        Object lock = new Object();
        int[] state = new int[3];  // round, woken, quit
        state[0] = -1;
        long[] wake = new long[clients];
        AtomicReference<String> error = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            final int me = i;
            DistributedBarrier b = new DistributedBarrier(cs.get(i), barrierPath);
            Thread t = new Thread(() -> {
                int seen = -1;
                for (;;) {
                    synchronized (lock) {
                        while (state[2] == 0 && state[0] == seen) {
                            try {
                                lock.wait();
                            } catch (InterruptedException e) {
                                return;
                            }
                        }
                        if (state[2] != 0) {
                            return;
                        }
                        seen = state[0];
                    }
                    boolean passed = false;
                    String why = null;
                    try {
                        passed = b.waitOnBarrier(30, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        why = e.toString();
                    }
                    long now = System.nanoTime();
                    synchronized (lock) {
                        wake[me] = now;
                        if (!passed) {
                            error.compareAndSet(null, why == null ? "a waiter was not released within 30 s" : why);
                        }
                        state[1]++;
                        lock.notifyAll();
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        List<Double> latencies = new ArrayList<>();
        List<Double> removeMs = new ArrayList<>();
        String failure = null;
        try {
            for (int k = 0; k < releases; k++) {
                gate.setBarrier();
                synchronized (lock) {
                    if (error.get() != null) {
                        break;
                    }
                    state[1] = 0;
                    state[0]++;
                    lock.notifyAll();
                }
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (watchersOf(barrierPath) < clients) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("the waiters' watches were not all set within 30 s");
                    }
                    Thread.sleep(1);
                }
                long t0 = System.nanoTime();
                gate.removeBarrier();
                removeMs.add((System.nanoTime() - t0) / 1e6);
                synchronized (lock) {
                    long until = System.nanoTime() + 60_000_000_000L;
                    while (state[1] < clients) {
                        long left = until - System.nanoTime();
                        if (left <= 0) {
                            throw new IllegalStateException("waiters not back within 60 s");
                        }
                        lock.wait(Math.max(1, left / 1_000_000));
                    }
                    for (long w : wake) {
                        latencies.add((w - t0) / 1e6);
                    }
                }
            }
        } catch (Exception e) {
            failure = e.toString();
        }
        synchronized (lock) {
            state[2] = 1;
            lock.notifyAll();
        }
        gate.removeBarrier();
        for (Thread t : threads) {
            t.join();
        }
        if (error.get() != null && failure == null) {
            failure = error.get();
        }
        controller.delete().quietly().forPath(path);
        if (failure != null) {
            throw new IllegalStateException(failure);
        }
        double p50 = percentile(latencies, 0.5), max = percentile(latencies, 1.0);
        System.out.println(head() + ",\"waiters\":" + clients + ",\"releases\":" + releases + ",\"rtt_ms\":" + rtt + ",\"p50_ms\":" + p50
                + ",\"max_ms\":" + max + ",\"p50_rtt\":" + p50 / rtt + ",\"max_rtt\":" + max / rtt + ",\"remove_p50_ms\":"
                + percentile(removeMs, 0.5) + "}");
        for (CuratorFramework c : cs) {
            c.close();
        }
        controller.close();
        return 0;
    }

    static int ids() throws Exception {
        String idsPath = path + "/ids";
        CuratorFramework c = client(connect);
        ensurePath(c, path);
        double rtt = rttMs(c, path);
        DistributedAtomicLong counter = new DistributedAtomicLong(c, idsPath, new RetryNTimes(1000, 1));
        long last = 0;
        long warmEnd = System.nanoTime() + (long) (warmup * 1e9);
        while (System.nanoTime() < warmEnd) {
            AtomicValue<Long> r = counter.increment();
            if (!r.succeeded()) {
                throw new IllegalStateException("an increment failed");
            }
            last = r.postValue();
        }
        long packets0 = packetsReceived();
        long t0 = System.nanoTime();
        long end = t0 + (long) (seconds * 1e9);
        long n = 0;
        while (System.nanoTime() < end) {
            AtomicValue<Long> r = counter.increment();
            if (!r.succeeded()) {
                throw new IllegalStateException("an increment failed");
            }
            long id = r.postValue();
            if (id <= last) {
                throw new IllegalStateException("id " + id + " after " + last);
            }
            last = id;
            n++;
        }
        double window = (System.nanoTime() - t0) / 1e9;
        long packets = packetsReceived() - packets0;
        System.out.println(head() + ",\"block\":1,\"seconds\":" + window + ",\"ids\":" + n + ",\"ids_per_s\":" + n / window
                + ",\"requests_per_1000_ids\":" + (n > 0 ? packets * 1000.0 / n : 0) + ",\"rtt_ms\":" + rtt + "}");
        c.delete().quietly().forPath(idsPath);
        c.delete().quietly().forPath(path);
        c.close();
        return 0;
    }

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "error");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        int code;
        try {
            if (args.length < 3) {
                throw new IllegalArgumentException("usage: CoordinationBench SCENARIO CONNECT PATH [--clients N] [--seconds S] "
                        + "[--warmup S] [--releases K] [--block B] [--direct CONNECT]");
            }
            scenario = args[0];
            connect = args[1];
            path = args[2];
            direct = connect;
            for (int i = 3; i + 1 < args.length; i += 2) {
                switch (args[i]) {
                    case "--clients": clients = Integer.parseInt(args[i + 1]); break;
                    case "--seconds": seconds = Double.parseDouble(args[i + 1]); break;
                    case "--warmup": warmup = Double.parseDouble(args[i + 1]); break;
                    case "--releases": releases = Integer.parseInt(args[i + 1]); break;
                    case "--block": break;
                    case "--direct": direct = args[i + 1]; break;
                    default: throw new IllegalArgumentException("unknown option " + args[i]);
                }
            }
            switch (scenario) {
                case "inc": code = inc(); break;
                case "barrier": code = barrier(); break;
                case "ids": code = ids(); break;
                default: throw new IllegalArgumentException("unknown scenario " + scenario);
            }
        } catch (Throwable t) {
            System.err.println("CoordinationBench: " + t);
            t.printStackTrace(System.err);
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }
}
