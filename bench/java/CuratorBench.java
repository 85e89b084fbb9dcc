// CuratorBench — Apache Curator 5.4's side of zkr's benchmark: InterProcessMutex and
// InterProcessReadWriteLock on one CuratorFramework (ExponentialBackoffRetry), with the same
// command line and the same one-line JSON output as bench/zkr_bench.cpp:
//
//   CuratorBench curator SCENARIO CONNECT PATH [--threads T] [--seconds S] [--warmup W]
//       [--start-at MS] [--emit-latencies] [--write-percent P] [--waiters N] [--seed N]
//       [--server-pids P1,P2,...] [--mntr-servers HOST:PORT,...] [--settle-ms MS]
//   CuratorBench warmup          (loads the classes, no server: for the class-data-sharing archive)
//
// Scenarios: uncontended, contended, distinct, shared-reads, rw-mix, herd (see zkr_bench.cpp),
// and the recipe scenarios (bench/java/README.md; zkr's side is in zkr_bench, bench.py pairs them):
//   latch-handoff   --waiters N latches on PATH; the leader closes: close() -> the next isLeader
//   latch-join      one latch at a time on PATH: start() -> isLeader (then close, node gone)
//   sem-uncontended 1 thread: InterProcessSemaphoreV2(PATH, --max M) acquire + returnLease
//   sem-contended   --threads T threads, one semaphore each, --max M: leases per second
//   queue-depth     --waiters N threads queued on one InterProcessMutex behind a holder, each
//                   released as soon as granted: time per hand-off; the failure point if any
//   queue-limit     Curator-named contender nodes added --step at a time (up to --waiters) under
//                   PATH, an InterProcessMutex attempt after each step: the queue length at which
//                   Curator's client fails (its 1 MiB packet limit on the listing)
//   multi-lock      1 thread: InterProcessMultiLock over the InterProcessMutexes PATH/a and PATH/b
// The timed scenarios, latch-join, latch-handoff and sem-* add the servers' cost over the window,
// as zkr_bench: server_requests_per_cycle (mntr zk_packets_received summed over --mntr-servers,
// default CONNECT's), harness_requests_per_cycle (the benchmark's own polls and watches among them)
// and server_cpu_ms_per_1000 (utime + stime of the --server-pids processes, /proc/PID/stat).
// latch-handoff --settle-ms MS: once all have joined, sleep MS instead of polling wchs (a 4lw
// costs the server CPU that is not the recipe's).
// CPU is the process's (OperatingSystemMXBean.getProcessCpuTime: user+sys, every thread: JIT and
// GC included) over the measured window; RSS is VmHWM from /proc/self/status.
// Build with bench/java/build.sh.

import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;

public final class CuratorBench {
    static final class Options {
        String driver, scenario, connect, path;
        int threads = 1;
        double seconds = 3, warmup = 1;
        Long startAtMs = null;
        boolean emitLatencies = false;
        int writePercent = 10, waiters = 10;
        long seed = 1;
        int max = 3, step = 1000;
        int[] serverPids = new int[0]; // the servers' processes (their CPU over the window)
        String mntrServers;            // the servers to ask mntr (default: connect's)
        int settleMs = -1;             // latch-handoff: sleep instead of polling wchs (-1: poll)
    }

    static final class Usage extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Usage(String m) {
            super(m);
        }
    }

    static Options parse(String[] args) {
        Options o = new Options();
        List<String> pos = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("--")) {
                if (a.equals("--emit-latencies")) {
                    o.emitLatencies = true;
                    continue;
                }
                if (i + 1 >= args.length) throw new Usage("missing value for " + a);
                String v = args[++i];
                try {
                    switch (a) {
                        case "--threads": o.threads = Integer.parseInt(v); break;
                        case "--seconds": o.seconds = Double.parseDouble(v); break;
                        case "--warmup": o.warmup = Double.parseDouble(v); break;
                        case "--start-at": o.startAtMs = Long.parseLong(v); break;
                        case "--write-percent": o.writePercent = Integer.parseInt(v); break;
                        case "--waiters": o.waiters = Integer.parseInt(v); break;
                        case "--seed": o.seed = Long.parseLong(v); break;
                        case "--max": o.max = Integer.parseInt(v); break;
                        case "--step": o.step = Integer.parseInt(v); break;
                        case "--server-pids":
                            o.serverPids = Arrays.stream(v.split(",")).filter(x -> !x.isEmpty()).mapToInt(Integer::parseInt).toArray();
                            break;
                        case "--mntr-servers": o.mntrServers = v; break;
                        case "--settle-ms": o.settleMs = Integer.parseInt(v); break;
                        default: throw new Usage("unknown option " + a);
                    }
                } catch (NumberFormatException e) {
                    throw new Usage("bad value for " + a);
                }
            } else {
                pos.add(a);
            }
        }
        if (pos.size() != 4) throw new Usage("expected DRIVER SCENARIO CONNECT PATH");
        o.driver = pos.get(0);
        o.scenario = pos.get(1);
        o.connect = pos.get(2);
        o.path = pos.get(3);
        if (o.mntrServers == null) o.mntrServers = o.connect;
        if (!o.driver.equals("curator")) throw new Usage("this driver is 'curator'");
        if (o.threads < 1 || o.seconds <= 0 || o.warmup < 0 || o.waiters < 1 || o.writePercent < 0 || o.writePercent > 100
                || o.max < 1 || o.step < 1)
            throw new Usage("out-of-range option");
        if ((o.scenario.equals("uncontended") || o.scenario.equals("sem-uncontended") || o.scenario.equals("latch-join")
                || o.scenario.equals("multi-lock")) && o.threads != 1) throw new Usage(o.scenario + " runs 1 thread");
        if (o.scenario.equals("latch-handoff") && o.waiters < 2) throw new Usage("latch-handoff needs --waiters >= 2");
        return o;
    }

    // ------------------------------------------------------------------ measuring

    static double cpuSeconds() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
        }
        return Double.NaN;
    }

    static long peakRssKb() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        } catch (Exception e) {
            // fall through
        }
        return -1;
    }

    /** A growable array of longs (no boxing in the measured loop). */
    static final class LongList {
        long[] a = new long[1024];
        int n = 0;

        void add(long v) {
            if (n == a.length) a = Arrays.copyOf(a, n * 2);
            a[n++] = v;
        }
    }

    static double percentileUs(long[] sorted, double q) {
        if (sorted.length == 0) return 0;
        int i = (int) Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)));
        return sorted[i] / 1e3;
    }

    static final class Json {
        final StringBuilder b = new StringBuilder();

        Json raw(String k, String v) {
            b.append(b.length() == 0 ? "{" : ", ").append('"').append(k).append("\": ").append(v);
            return this;
        }

        Json str(String k, String v) {
            return raw(k, "\"" + v.replace("\\", "\\\\").replace("\"", "\\\"").replaceAll("[\\x00-\\x1f]", " ") + "\"");
        }

        Json num(String k, double v) {
            if (Double.isNaN(v) || Double.isInfinite(v)) return raw(k, "null");
            return raw(k, String.format(java.util.Locale.ROOT, "%.6g", v));
        }

        Json integer(String k, long v) {
            return raw(k, Long.toString(v));
        }

        String done() {
            return b.append('}').toString();
        }
    }

    interface Cycle {
        void run(int thread, SplittableRandom rng) throws Exception;
    }

    interface Prepare {
        void run(int thread) throws Exception;
    }

    static final class RunResult {
        long[] latencies;
        double cpuS;
        long errors;
        String firstError;
        ServerCost server = new ServerCost(); // the servers' cost over the window
    }

    /**
     * Cycles ended and requests the benchmark sent itself, so far: read by the window's sampler
     * (RecipeBench.CpuWindow) together with the servers' counters, so that a window's requests are
     * divided by the cycles that ended between its two mntr samples, not by those of [t0, t1] (a
     * sample taken late on a busy machine would otherwise miscount).
     */
    static final AtomicLong cyclesDone = new AtomicLong();
    static final AtomicLong harnessSent = new AtomicLong();

    /** `n` cycles ended (a latch-handoff round: its hand-offs). */
    static void noteCycles(long n) {
        cyclesDone.addAndGet(n);
    }

    /** One request sent by the benchmark itself (a poll, a watch of its own), not the recipe's. */
    static void noteHarness() {
        harnessSent.incrementAndGet();
    }

    /** What the servers did between the window's samples: requests per cycle, the harness's, cycles ended, CPU. */
    static final class ServerCost {
        double requestsPerCycle = -1;  // every session's, summed over the servers (-1: mntr not answered)
        double harness = 0;            // requests this benchmark sent itself (not the recipe's)
        double cycles = 0;             // cycles ended
        double cpuS = -1;              // the server processes' CPU (-1: no --server-pids)
    }

    /** server_requests_per_cycle, harness_requests_per_cycle, server_cpu_ms_per_1000 (null where unknown). */
    static void addServerCost(Json j, ServerCost c) {
        if (c.requestsPerCycle < 0) j.raw("server_requests_per_cycle", "null");
        else j.num("server_requests_per_cycle", c.requestsPerCycle);
        if (c.cycles <= 0) j.raw("harness_requests_per_cycle", "null");
        else j.num("harness_requests_per_cycle", c.harness / c.cycles);
        if (c.cpuS < 0 || c.cycles <= 0) j.raw("server_cpu_ms_per_1000", "null");
        else j.num("server_cpu_ms_per_1000", c.cpuS * 1e3 / c.cycles * 1000.0);
    }

    /** Clock ticks per second of /proc/PID/stat (getconf CLK_TCK; 100, Linux's USER_HZ, if that fails). */
    static final double CLK_TCK = clockTicks();

    static double clockTicks() {
        try {
            Process p = new ProcessBuilder("getconf", "CLK_TCK").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII).trim();
            if (p.waitFor() == 0) return Double.parseDouble(out);
        } catch (Exception e) {
            // fall through
        }
        return 100;
    }

    /**
     * CPU time (utime + stime, s) of the processes `pids` so far, summed; -1 if one cannot be read.
     * /proc/PID/stat fields 14 and 15, counted after the ")" that ends field 2.
     */
    static double processesCpuSeconds(int[] pids) {
        double total = 0;
        for (int pid : pids) {
            try {
                String stat = new String(Files.readAllBytes(Paths.get("/proc/" + pid + "/stat")), StandardCharsets.US_ASCII);
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
                // f[0] is field 3 (state): fields 14 and 15 are f[11] and f[12].
                total += (Long.parseLong(f[11]) + Long.parseLong(f[12])) / CLK_TCK;
            } catch (Exception e) {
                return -1;
            }
        }
        return total;
    }

    static long[] window(Options o) {
        long now = System.nanoTime();
        long t0;
        if (o.startAtMs != null) {
            long wall = System.currentTimeMillis();
            t0 = now + (o.startAtMs - wall) * 1_000_000L;
            if (t0 < now) throw new IllegalStateException("ready " + (wall - o.startAtMs) + " ms after --start-at");
        } else {
            t0 = now + (long) (o.warmup * 1e9);
        }
        return new long[] {t0, t0 + (long) (o.seconds * 1e9)};
    }

    static void sleepUntil(long nanoTime) throws InterruptedException {
        for (long d; (d = nanoTime - System.nanoTime()) > 0;) TimeUnit.NANOSECONDS.sleep(d);
    }

    static RunResult runThreads(Options o, Prepare prepare, Cycle cycle) throws Exception {
        long[] w = window(o);
        long t0 = w[0], t1 = w[1];
        LongList[] lat = new LongList[o.threads];
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong errors = new AtomicLong();
        String[] firstError = new String[1];
        Thread[] pool = new Thread[o.threads];
        for (int i = 0; i < o.threads; i++) {
            final int id = i;
            lat[i] = new LongList();
            pool[i] = new Thread(() -> {
                SplittableRandom rng = new SplittableRandom(o.seed * 1000003 + id);
                try {
                    if (prepare != null) prepare.run(id);
                    while (!stop.get()) {
                        long s = System.nanoTime();
                        if (s >= t1) break;
                        cycle.run(id, rng);
                        cyclesDone.incrementAndGet();
                        long e = System.nanoTime();
                        if (e >= t0 && e <= t1) lat[id].add(e - s);
                    }
                } catch (Exception e) {
                    errors.incrementAndGet();
                    stop.set(true);
                    synchronized (firstError) {
                        if (firstError[0] == null) firstError[0] = e.toString();
                    }
                }
            });
            pool[i].start();
        }
        RecipeBench.CpuWindow sampler = new RecipeBench.CpuWindow(o, t0, t1);
        double cpuS = sampler.seconds(); // returns at the window's end
        for (Thread t : pool) {
            t.join(Math.max(1, (t1 - System.nanoTime()) / 1_000_000 + 20_000));
            if (t.isAlive()) {
                System.out.println(new Json().str("driver", o.driver).str("scenario", o.scenario).integer("errors", 1)
                        .str("error", "stuck: threads still in a cycle 20 s after the window").done());
                System.out.flush();
                Runtime.getRuntime().halt(1);
            }
        }
        int total = 0;
        for (LongList l : lat) total += l.n;
        long[] all = new long[total];
        int k = 0;
        for (LongList l : lat) {
            System.arraycopy(l.a, 0, all, k, l.n);
            k += l.n;
        }
        RunResult r = new RunResult();
        r.latencies = all;
        r.cpuS = cpuS;
        r.server = sampler.cost();
        r.errors = errors.get();
        r.firstError = firstError[0];
        return r;
    }

    static String finishTimed(Options o, RunResult r) {
        long[] sorted = r.latencies.clone();
        Arrays.sort(sorted);
        long cycles = sorted.length;
        Json j = new Json().str("driver", o.driver).str("scenario", o.scenario).integer("threads", o.threads);
        j.integer("procs", 1).num("seconds", o.seconds).integer("cycles", cycles).num("cycles_per_s", cycles / o.seconds);
        j.num("p50_us", percentileUs(sorted, 0.5)).num("p99_us", percentileUs(sorted, 0.99));
        j.num("cpu_s", r.cpuS);
        if (cycles > 0) j.num("cpu_ms_per_1000", r.cpuS * 1e3 / cycles * 1000.0);
        else j.raw("cpu_ms_per_1000", "null");
        j.integer("rss_kb", peakRssKb()).integer("errors", r.errors);
        if (r.firstError != null) j.str("error", r.firstError);
        addServerCost(j, r.server);
        if (o.emitLatencies) {
            StringBuilder a = new StringBuilder("[");
            for (int i = 0; i < r.latencies.length; i++) {
                if (i > 0) a.append(',');
                a.append((r.latencies[i] + 500) / 1000);
            }
            j.raw("latencies_us", a.append(']').toString());
        }
        return j.done();
    }

    // ------------------------------------------------------------------ four-letter words

    /** The host:port of every server of a connect string (its chroot dropped). */
    static List<String> serversOf(String connect) {
        int slash = connect.indexOf('/');
        List<String> out = new ArrayList<>();
        for (String s : (slash < 0 ? connect : connect.substring(0, slash)).split(",")) {
            if (!s.isEmpty()) out.add(s);
        }
        return out;
    }

    /** A four-letter word to the first server of the connect string. */
    static String fourLetter(String connect, String word) throws Exception {
        return fourLetterAt(serversOf(connect).get(0), word);
    }

    /** A four-letter word to one server ("host:port"). */
    static String fourLetterAt(String server, String word) throws Exception {
        int colon = server.lastIndexOf(':');
        String host = colon < 0 ? server : server.substring(0, colon);
        int port = colon < 0 ? 2181 : Integer.parseInt(server.substring(colon + 1));
        try (Socket s = new Socket(host, port)) {
            OutputStream out = s.getOutputStream();
            out.write(word.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    static long serverNotifications(String connect) throws Exception {
        long total = 0;
        for (String line : fourLetter(connect, "mntr").split("\n")) {
            String[] kv = line.split("\t");
            if (kv.length == 2 && kv[0].startsWith("zk_sum_node_") && kv[0].contains("_watch_count"))
                total += Long.parseLong(kv[1].trim());
        }
        return total;
    }

    static long serverWatches(String connect) throws Exception {
        String r = fourLetter(connect, "wchs");
        int at = r.indexOf("Total watches:");
        return at < 0 ? -1 : Long.parseLong(r.substring(at + 14).trim().split("\\s")[0]);
    }

    /** serverWatches summed over every server of `servers` (a client's watches are on the server it is connected to). */
    static long serverWatchesAll(String servers) throws Exception {
        long total = 0;
        for (String server : serversOf(servers)) {
            long n = serverWatches(server);
            if (n < 0) return -1;
            total += n;
        }
        return total;
    }

    // ------------------------------------------------------------------ scenarios

    static final class Exclusion {
        final AtomicInteger writers = new AtomicInteger(), readers = new AtomicInteger();

        void writeIn() {
            if (writers.getAndIncrement() != 0 || readers.get() != 0) throw new IllegalStateException("mutual exclusion violated (write)");
        }

        void writeOut() {
            writers.decrementAndGet();
        }

        void readIn() {
            readers.incrementAndGet();
            if (writers.get() != 0) throw new IllegalStateException("mutual exclusion violated (read)");
        }

        void readOut() {
            readers.decrementAndGet();
        }
    }

    static int childCount(CuratorFramework c, String path) throws Exception {
        try {
            return c.getChildren().forPath(path).size();
        } catch (KeeperException.NoNodeException e) {
            return 0;
        }
    }

    static void deleteQuietly(CuratorFramework c, String path) {
        try {
            c.delete().forPath(path);
        } catch (Exception e) {
            // already reaped, or not empty: fine
        }
    }

    static int run(Options o) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(o.connect, 10_000, 10_000, new ExponentialBackoffRetry(1000, 3));
        client.start();
        try {
            if (!client.blockUntilConnected(15, TimeUnit.SECONDS)) throw new IllegalStateException("not connected to " + o.connect);
            switch (o.scenario) {
                case "herd": return herd(o, client);
                case "latch-handoff": return RecipeBench.latchHandoff(o, client);
                case "latch-join": return RecipeBench.latchJoin(o, client);
                case "sem-uncontended":
                case "sem-contended": return RecipeBench.semaphore(o, client);
                case "queue-depth": return RecipeBench.queueDepth(o, client);
                case "queue-limit": return RecipeBench.queueLimit(o, client);
                default: return timed(o, client);
            }
        } finally {
            client.close();
        }
    }

    static int timed(Options o, CuratorFramework client) throws Exception {
        // One check per lock path (distinct: each thread its own; otherwise one).
        Exclusion[] checks = new Exclusion[o.threads];
        for (int i = 0; i < o.threads; i++) checks[i] = new Exclusion();
        Exclusion check = checks[0];
        List<String> paths = new ArrayList<>();
        InterProcessMutex[] mutexes = new InterProcessMutex[o.threads];
        InterProcessReadWriteLock[] rws = new InterProcessReadWriteLock[o.threads];
        InterProcessMultiLock[] multis = new InterProcessMultiLock[o.threads];
        Prepare prepare;
        Cycle cycle;
        switch (o.scenario) {
            case "multi-lock": {
                // Two mutexes as one (zkr's side: zkr::multi_lock over the same two paths).
                paths.add(o.path + "/a");
                paths.add(o.path + "/b");
                prepare = id -> multis[id] = new InterProcessMultiLock(client, paths);
                cycle = (id, rng) -> {
                    InterProcessMultiLock m = multis[id];
                    m.acquire();
                    check.writeIn();
                    check.writeOut();
                    m.release();
                };
                break;
            }
            case "uncontended":
            case "contended":
            case "distinct": {
                boolean distinct = o.scenario.equals("distinct");
                for (int i = 0; i < (distinct ? o.threads : 1); i++) paths.add(distinct ? o.path + "/t" + i : o.path);
                prepare = id -> mutexes[id] = new InterProcessMutex(client, paths.get(distinct ? id : 0));
                cycle = (id, rng) -> {
                    InterProcessMutex m = mutexes[id];
                    Exclusion mine = checks[distinct ? id : 0];
                    m.acquire();
                    mine.writeIn();
                    mine.writeOut();
                    m.release();
                };
                break;
            }
            case "shared-reads":
            case "rw-mix": {
                paths.add(o.path);
                int writes = o.scenario.equals("rw-mix") ? o.writePercent : 0;
                prepare = id -> rws[id] = new InterProcessReadWriteLock(client, o.path);
                cycle = (id, rng) -> {
                    InterProcessReadWriteLock rw = rws[id];
                    if (writes > 0 && rng.nextInt(100) < writes) {
                        rw.writeLock().acquire();
                        check.writeIn();
                        check.writeOut();
                        rw.writeLock().release();
                    } else {
                        rw.readLock().acquire();
                        check.readIn();
                        check.readOut();
                        rw.readLock().release();
                    }
                };
                break;
            }
            default:
                throw new Usage("unknown scenario " + o.scenario);
        }
        RunResult r = runThreads(o, prepare, cycle);
        if (r.errors == 0 && o.startAtMs == null) {
            for (String p : paths) {
                int left = childCount(client, p);
                if (left != 0) {
                    r.errors++;
                    r.firstError = left + " node(s) left under " + p + " after the run";
                }
            }
        }
        System.out.println(finishTimed(o, r));
        System.out.flush();
        if (o.startAtMs == null) {
            for (String p : paths) deleteQuietly(client, p);
            if (o.scenario.equals("multi-lock")) deleteQuietly(client, o.path);
        }
        return r.errors == 0 ? 0 : 1;
    }

    static int herd(Options o, CuratorFramework client) throws Exception {
        InterProcessMutex holder = new InterProcessMutex(client, o.path);
        holder.acquire();
        AtomicLong releaseNs = new AtomicLong();
        AtomicInteger order = new AtomicInteger();
        long[] handoff = new long[o.waiters];
        AtomicBoolean failed = new AtomicBoolean();
        Thread[] pool = new Thread[o.waiters];
        long q0 = System.nanoTime();
        for (int i = 0; i < o.waiters; i++) {
            pool[i] = new Thread(() -> {
                try {
                    InterProcessMutex m = new InterProcessMutex(client, o.path);
                    m.acquire();
                    long got = System.nanoTime();
                    handoff[order.getAndIncrement()] = got - releaseNs.get();
                    releaseNs.set(System.nanoTime());
                    m.release();
                } catch (Exception e) {
                    System.err.println("CuratorBench: herd waiter: " + e);
                    failed.set(true);
                }
            });
            pool[i].start();
        }
        long deadline = System.nanoTime() + 300_000_000_000L;
        while (childCount(client, o.path) < o.waiters + 1) {
            if (System.nanoTime() > deadline || failed.get()) throw new IllegalStateException("the waiters did not queue");
            Thread.sleep(20);
        }
        double queueS = (System.nanoTime() - q0) / 1e9;
        // The last waiters' watches are set (or 10 s passed: a recipe may set fewer).
        long watches;
        long watchDeadline = System.nanoTime() + 10_000_000_000L;
        while ((watches = serverWatches(o.connect)) < o.waiters && System.nanoTime() < watchDeadline) Thread.sleep(20);
        long n0 = serverNotifications(o.connect);
        long c0 = System.nanoTime();
        releaseNs.set(c0);
        holder.release();
        for (Thread t : pool) t.join();
        double chainS = (System.nanoTime() - c0) / 1e9;
        if (failed.get()) throw new IllegalStateException("a herd waiter failed");
        int left = childCount(client, o.path);
        if (left != 0) throw new IllegalStateException(left + " node(s) left under " + o.path);
        long notifications = serverNotifications(o.connect) - n0;

        long[] sorted = handoff.clone();
        Arrays.sort(sorted);
        int n = handoff.length;
        int tenth = Math.max(1, n / 10);
        double first = 0, last = 0;
        for (int i = 0; i < tenth; i++) {
            first += handoff[i];
            last += handoff[n - 1 - i];
        }
        Json j = new Json().str("driver", o.driver).str("scenario", "herd").integer("threads", o.waiters + 1).integer("procs", 1);
        j.integer("waiters", o.waiters).integer("handoffs", n);
        j.num("handoff_p50_us", percentileUs(sorted, 0.5)).num("handoff_p99_us", percentileUs(sorted, 0.99));
        j.num("handoff_max_us", percentileUs(sorted, 1.0));
        j.num("handoff_first_tenth_us", first / tenth / 1e3).num("handoff_last_tenth_us", last / tenth / 1e3);
        j.num("queue_s", queueS).num("chain_s", chainS);
        j.integer("server_watches_queued", watches);
        j.num("notifications_per_release", (double) notifications / Math.max(1, n));
        j.raw("wakeups_per_release", "null");
        j.integer("rss_kb", peakRssKb()).integer("errors", 0);
        System.out.println(j.done());
        System.out.flush();
        deleteQuietly(client, o.path);
        return 0;
    }

    /** Loads what a run loads, without a server: for the class-data-sharing archive. */
    static void warmup() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient("127.0.0.1:1", 1000, 100, new ExponentialBackoffRetry(1000, 0));
        new InterProcessMutex(c, "/warmup");
        new InterProcessReadWriteLock(c, "/warmup");
        new InterProcessMultiLock(c, Arrays.asList("/warmup/a", "/warmup/b"));
        new Json().num("x", 1.5).str("y", "z").done();
        new LongList().add(1);
        new Exclusion();
        RecipeBench.warmup(c);
        cpuSeconds();
        peakRssKb();
        c.close();
    }

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn", "error");
        int code;
        try {
            if (args.length == 1 && args[0].equals("warmup")) {
                warmup();
                code = 0;
            } else {
                code = run(parse(args));
            }
        } catch (Usage u) {
            System.err.println("CuratorBench: " + u.getMessage());
            code = 2;
        } catch (Throwable t) {
            System.err.println("CuratorBench: " + t);
            t.printStackTrace(System.err);
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }
}
