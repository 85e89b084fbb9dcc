// CuratorLockDriver — a command-line driver around Apache Curator's lock recipes, used by zkr's
// interoperability tests (a zkr process and a Curator process contend for the same lock).
//
// Build with integration/interop/build.sh; it prints the `java ... CuratorLockDriver` prefix.
//
// Line protocol: every line on stdout is machine-readable and flushed immediately. Logging goes to
// stderr (slf4j-simple at WARN) or nowhere (slf4j-nop). Exit codes:
//   0  success
//   1  error (exception, connection failure; message on stderr)
//   2  usage error
//   3  violation detected (rw-mix)
//
// Modes:
//   increment CONNECT LOCK_PATH COUNTER_PATH N [THREADS]
//       THREADS (default 1) threads, each N times: acquire InterProcessMutex(LOCK_PATH), read
//       COUNTER_PATH as a decimal integer (created as "0" under the lock if missing), write value+1
//       unversioned, release. Prints `done <THREADS*N>`.
//   hold CONNECT LOCK_PATH
//       Acquire an InterProcessMutex, print `acquired <lock node path>`, wait for a `release` line
//       on stdin (or EOF), release, print `released`.
//   wait-hold CONNECT LOCK_PATH
//       Like hold, but first prints `queued <lock node path>` as soon as our node exists.
//   rw-hold CONNECT LOCK_PATH read|write
//       Like wait-hold with InterProcessReadWriteLock.readLock()/writeLock().
//   rw-mix CONNECT LOCK_PATH STATE_PATH N WRITE_PERCENT SEED
//       N operations, each a write (probability WRITE_PERCENT %, java.util.Random(SEED)) or a read,
//       checking mutual exclusion through STATE_PATH ("readers writers"). Prints
//       `done reads=<r> writes=<w> max_concurrent_readers=<m>`, or `violation ...` and exits 3.
//   get CONNECT PATH
//       Print `data <contents of PATH>` (or `nonode`). A helper for checking results.
//   session CONNECT
//       Many recipe objects (LeaderLatch, LeaderSelector, InterProcessSemaphoreV2, SharedCount,
//       InterProcessMutex, InterProcessMultiLock) on one client, driven by tagged commands on
//       stdin, with replies and events on stdout: see RecipeSession.java for the protocol.
//
// Stdin in the hold modes: `release` lines and EOF are honoured once the lock is held (input that
// arrives earlier is kept, so `echo release | ... hold ...` acquires and releases at once). A
// `cancel` line received while still waiting abandons the attempt (our node is deleted), prints
// `cancelled` and exits 0. Connection state changes (SUSPENDED, LOST, RECONNECTED) are reported on
// stderr only.
//
// Environment: CURATOR_SESSION_MS (default 10000), CURATOR_CONNECT_MS (how long to wait for the
// first connection, default 15000), CURATOR_LOG_LEVEL (slf4j-simple level on stderr, default warn).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public final class CuratorLockDriver {
    static final int EXIT_ERROR = 1;
    static final int EXIT_USAGE = 2;
    static final int EXIT_VIOLATION = 3;

    /** Thrown to end the process with a given exit code and message. */
    static final class Exit extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int code;

        Exit(int code, String message) {
            super(message);
            this.code = code;
        }
    }

    static volatile CuratorFramework client;

    // ------------------------------------------------------------------ output

    static synchronized void out(String line) {
        System.out.print(line + "\n");
        System.out.flush();
    }

    static void err(String line) {
        System.err.println("CuratorLockDriver: " + line);
        System.err.flush();
    }

    // ------------------------------------------------------------------ main

    public static void main(String[] args) {
        // slf4j-simple (if it is the binding on the class path): WARN and above, to stderr.
        // CURATOR_LOG_LEVEL overrides the level; at the default level, ZooKeeper's ClientCnxn is
        // limited to ERROR since it logs a WARN with a stack trace on every normal close().
        String level = System.getenv("CURATOR_LOG_LEVEL");
        if (level == null || level.isEmpty()) {
            level = "warn";
            setDefaultProperty("org.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn", "error");
        }
        setDefaultProperty("org.slf4j.simpleLogger.defaultLogLevel", level);
        setDefaultProperty("org.slf4j.simpleLogger.logFile", "System.err");
        setDefaultProperty("org.slf4j.simpleLogger.showDateTime", "true");

        int code;
        try {
            code = run(args);
        } catch (Exit e) {
            if (e.getMessage() != null && !e.getMessage().isEmpty()) {
                err(e.getMessage());
            }
            code = e.code;
        } catch (InterruptedException e) {
            err("interrupted");
            code = EXIT_ERROR;
        } catch (Throwable t) {
            err("error: " + t);
            t.printStackTrace(System.err);
            code = EXIT_ERROR;
        }
        closeClient();
        System.out.flush();
        System.err.flush();
        System.exit(code);
    }

    static void setDefaultProperty(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    static int run(String[] args) throws Exception {
        if (args.length < 1) {
            throw usage("missing mode");
        }
        String mode = args[0];
        switch (mode) {
            case "increment": {
                if (args.length != 5 && args.length != 6) {
                    throw usage("increment CONNECT LOCK_PATH COUNTER_PATH N [THREADS]");
                }
                int n = parseInt(args[4], "N", 0);
                int threads = args.length == 6 ? parseInt(args[5], "THREADS", 1) : 1;
                connect(args[1]);
                return increment(args[2], args[3], n, threads);
            }
            case "hold":
            case "wait-hold": {
                if (args.length != 3) {
                    throw usage(mode + " CONNECT LOCK_PATH");
                }
                connect(args[1]);
                return holdLock(new InterProcessMutex(client, args[2]), args[2], mode.equals("wait-hold"));
            }
            case "rw-hold": {
                if (args.length != 4 || !(args[3].equals("read") || args[3].equals("write"))) {
                    throw usage("rw-hold CONNECT LOCK_PATH read|write");
                }
                connect(args[1]);
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, args[2]);
                InterProcessMutex lock = args[3].equals("read") ? rw.readLock() : rw.writeLock();
                return holdLock(lock, args[2], true);
            }
            case "rw-mix": {
                if (args.length != 7) {
                    throw usage("rw-mix CONNECT LOCK_PATH STATE_PATH N WRITE_PERCENT SEED");
                }
                int n = parseInt(args[4], "N", 0);
                int writePercent = parseInt(args[5], "WRITE_PERCENT", 0);
                if (writePercent > 100) {
                    throw usage("WRITE_PERCENT must be 0..100");
                }
                long seed;
                try {
                    seed = Long.parseLong(args[6]);
                } catch (NumberFormatException e) {
                    throw usage("SEED must be an integer, got '" + args[6] + "'");
                }
                connect(args[1]);
                return rwMix(args[2], args[3], n, writePercent, seed);
            }
            case "get": {
                if (args.length != 3) {
                    throw usage("get CONNECT PATH");
                }
                connect(args[1]);
                try {
                    byte[] data = client.getData().forPath(args[2]);
                    out("data " + (data == null ? "" : new String(data, StandardCharsets.UTF_8)));
                } catch (KeeperException.NoNodeException e) {
                    out("nonode");
                }
                return 0;
            }
            case "session": {
                if (args.length != 2) {
                    throw usage("session CONNECT");
                }
                connect(args[1]);
                return RecipeSession.run(client);
            }
            case "warmup":
                // Used by build.sh to record a class-data-sharing archive; needs no server.
                return warmup();
            default:
                throw usage("unknown mode '" + mode + "'");
        }
    }

    static Exit usage(String message) {
        return new Exit(EXIT_USAGE, "usage: " + message
                + "\nmodes: increment | hold | wait-hold | rw-hold | rw-mix | get | session (see the source header)");
    }

    static int parseInt(String s, String name, int min) {
        int v;
        try {
            v = Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw usage(name + " must be an integer, got '" + s + "'");
        }
        if (v < min) {
            throw usage(name + " must be >= " + min + ", got " + v);
        }
        return v;
    }

    static int envInt(String name, int def) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            return def;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new Exit(EXIT_USAGE, name + " must be an integer, got '" + v + "'");
        }
    }

    // ------------------------------------------------------------------ client

    static void connect(String connectString) throws InterruptedException {
        int sessionMs = envInt("CURATOR_SESSION_MS", 10000);
        int connectMs = envInt("CURATOR_CONNECT_MS", 15000);
        client = CuratorFrameworkFactory.builder()
                .connectString(connectString)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(Math.max(Math.min(connectMs, sessionMs), 100))
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        // On SIGTERM/SIGINT close the session so that our ephemeral lock nodes go away at once.
        Runtime.getRuntime().addShutdownHook(new Thread(CuratorLockDriver::closeClient, "close-client"));
        // Connection trouble is reported on stderr only (stdout keeps the documented lines).
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state != ConnectionState.CONNECTED) {
                err("connection state " + state);
            }
        });
        client.start();
        if (!client.blockUntilConnected(connectMs, TimeUnit.MILLISECONDS)) {
            throw new Exit(EXIT_ERROR, "could not connect to " + connectString + " within " + connectMs + " ms");
        }
    }

    static synchronized void closeClient() {
        CuratorFramework c = client;
        client = null;
        if (c != null) {
            try {
                c.close();
            } catch (Throwable t) {
                // best effort
            }
        }
    }

    static long sessionId() throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionId();
    }

    /** The participant node of `lock` whose ephemeral owner is our session, or null. */
    static String ownNode(InterProcessMutex lock) throws Exception {
        long sid = sessionId();
        Collection<String> nodes;
        try {
            nodes = lock.getParticipantNodes();
        } catch (KeeperException.NoNodeException e) {
            return null; // the lock path does not exist yet
        }
        for (String node : nodes) {
            Stat st = client.checkExists().forPath(node);
            if (st != null && st.getEphemeralOwner() == sid) {
                return node;
            }
        }
        return null;
    }

    static String ownNodeOrFail(InterProcessMutex lock) throws Exception {
        String node = ownNode(lock);
        if (node == null) {
            throw new Exit(EXIT_ERROR, "holding the lock, but found no participant node owned by session 0x"
                    + Long.toHexString(sessionId()));
        }
        return node;
    }

    /**
     * Loads (roughly) the classes a real run loads, without a server: builds a client for an
     * address where nothing listens, creates the lock recipes and the operation builders, and tries
     * to connect for a moment.
     */
    static int warmup() throws Exception {
        // Not stored in `client`: closing a client that never connected takes a second or so, and
        // there is no session to end.
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString("127.0.0.1:1")
                .sessionTimeoutMs(1000)
                .connectionTimeoutMs(200)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        InterProcessMutex mutex = new InterProcessMutex(client, "/warmup");
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, "/warmup");
        client.start();
        client.blockUntilConnected(300, TimeUnit.MILLISECONDS);
        client.getData().storingStatIn(new Stat());
        client.setData().withVersion(-1);
        client.create().creatingParentContainersIfNeeded();
        client.checkExists();
        client.getChildren();
        client.delete().guaranteed();
        Exception[] samples = {
                new KeeperException.NoNodeException(), new KeeperException.NodeExistsException(),
                new KeeperException.BadVersionException(), new Exit(0, ""),
        };
        new Random(1).nextInt(100);
        new LinkedBlockingQueue<String>().poll();
        new CountDownLatch(1).countDown();
        new AtomicReference<Object>().get();
        new State(0, 0, 0).toString();
        RecipeSession.warmup(client);
        encodeState(0, 0);
        out("warmup " + samples.length + " " + (mutex.isAcquiredInThisProcess() || rw.readLock().isAcquiredInThisProcess()));
        return 0;
    }

    // ------------------------------------------------------------------ increment

    static int increment(String lockPath, String counterPath, int n, int threads) throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    InterProcessMutex lock = new InterProcessMutex(client, lockPath);
                    for (int i = 0; i < n && failure.get() == null; i++) {
                        lock.acquire();
                        try {
                            long value;
                            try {
                                value = parseCounter(client.getData().forPath(counterPath), counterPath);
                            } catch (KeeperException.NoNodeException e) {
                                // Only ever created while holding the lock.
                                client.create().creatingParentContainersIfNeeded()
                                        .forPath(counterPath, "0".getBytes(StandardCharsets.UTF_8));
                                value = 0;
                            }
                            client.setData().withVersion(-1)
                                    .forPath(counterPath, Long.toString(value + 1).getBytes(StandardCharsets.UTF_8));
                        } finally {
                            lock.release();
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "increment-" + t);
            workers.add(th);
            th.start();
        }
        for (Thread th : workers) {
            th.join();
        }
        Throwable f = failure.get();
        if (f != null) {
            if (f instanceof Exit) {
                throw (Exit) f;
            }
            throw new Exit(EXIT_ERROR, "increment failed: " + f);
        }
        out("done " + ((long) n * threads));
        return 0;
    }

    static long parseCounter(byte[] data, String path) {
        String s = data == null ? "" : new String(data, StandardCharsets.UTF_8).trim();
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new Exit(EXIT_ERROR, path + " does not hold a decimal integer: '" + s + "'");
        }
    }

    // ------------------------------------------------------------------ hold modes

    static final String EOF = "\u0000eof";

    /** Reads stdin lines into a queue (EOF is queued as the EOF marker). */
    static LinkedBlockingQueue<String> startStdinReader() {
        LinkedBlockingQueue<String> q = new LinkedBlockingQueue<>();
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    q.add(line.trim());
                }
            } catch (Exception e) {
                // treat as EOF
            }
            q.add(EOF);
        }, "stdin");
        t.setDaemon(true);
        t.start();
        return q;
    }

    static int holdLock(InterProcessMutex lock, String lockPath, boolean reportQueued) throws Exception {
        LinkedBlockingQueue<String> stdin = startStdinReader();
        // Curator requires the thread that acquired a lock to release it: one thread does both.
        CountDownLatch acquired = new CountDownLatch(1);
        CountDownLatch releaseNow = new CountDownLatch(1);
        CountDownLatch finished = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread locker = new Thread(() -> {
            boolean held = false;
            try {
                lock.acquire();
                held = true;
                acquired.countDown();
                releaseNow.await();
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            } finally {
                if (held) {
                    try {
                        lock.release();
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }
                finished.countDown();
            }
        }, "lock-holder");
        locker.setDaemon(true);
        locker.start();

        // Waiting phase: report our node once it exists; watch for `cancel`.
        List<String> pending = new ArrayList<>(); // stdin lines received while waiting
        boolean queuedReported = !reportQueued;
        while (!acquired.await(queuedReported ? 50 : 5, TimeUnit.MILLISECONDS)) {
            if (finished.getCount() == 0) {
                break; // the locker failed
            }
            if (!queuedReported) {
                String node = ownNode(lock);
                if (node != null) {
                    out("queued " + node);
                    queuedReported = true;
                }
            }
            String line;
            while ((line = stdin.poll()) != null) {
                if (line.equals("cancel")) {
                    locker.interrupt(); // Curator deletes our node when acquire() is interrupted
                    finished.await(30, TimeUnit.SECONDS);
                    out("cancelled");
                    return 0;
                }
                pending.add(line);
            }
        }
        if (acquired.getCount() != 0) {
            Throwable f = failure.get();
            throw new Exit(EXIT_ERROR, "acquiring " + lockPath + " failed: " + f);
        }
        String node = ownNodeOrFail(lock);
        if (!queuedReported) {
            out("queued " + node);
        }
        out("acquired " + node);

        // Holding phase: wait for `release` or EOF.
        boolean release = false;
        for (String line : pending) {
            if (line.equals("release") || line.equals(EOF)) {
                release = true;
                break;
            }
        }
        while (!release) {
            String line = stdin.poll(100, TimeUnit.MILLISECONDS);
            if (finished.getCount() == 0) {
                break; // should not happen: the locker only finishes after releaseNow
            }
            if (line != null && (line.equals("release") || line.equals(EOF))) {
                release = true;
            }
        }
        releaseNow.countDown();
        if (!finished.await(60, TimeUnit.SECONDS)) {
            throw new Exit(EXIT_ERROR, "release of " + node + " did not finish within 60 s");
        }
        Throwable f = failure.get();
        if (f != null) {
            throw new Exit(EXIT_ERROR, "releasing " + node + " failed: " + f);
        }
        out("released");
        return 0;
    }

    // ------------------------------------------------------------------ rw-mix

    static final class State {
        final int readers;
        final int writers;
        final int version;

        State(int readers, int writers, int version) {
            this.readers = readers;
            this.writers = writers;
            this.version = version;
        }

        @Override
        public String toString() {
            return "readers=" + readers + " writers=" + writers + " version=" + version;
        }
    }

    static byte[] encodeState(int readers, int writers) {
        return (readers + " " + writers).getBytes(StandardCharsets.UTF_8);
    }

    /** Reads STATE_PATH; null if it does not exist. */
    static State readState(String path) throws Exception {
        Stat st = new Stat();
        byte[] data;
        try {
            data = client.getData().storingStatIn(st).forPath(path);
        } catch (KeeperException.NoNodeException e) {
            return null;
        }
        String s = data == null ? "" : new String(data, StandardCharsets.UTF_8).trim();
        String[] parts = s.split("\\s+");
        try {
            if (parts.length != 2) {
                throw new NumberFormatException();
            }
            return new State(Integer.parseInt(parts[0]), Integer.parseInt(parts[1]), st.getVersion());
        } catch (NumberFormatException e) {
            throw new Exit(EXIT_ERROR, path + " does not hold \"readers writers\": '" + s + "'");
        }
    }

    static Exit violation(String what) {
        out("violation " + what);
        return new Exit(EXIT_VIOLATION, "violation: " + what);
    }

    static int rwMix(String lockPath, String statePath, int n, int writePercent, long seed) throws Exception {
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, lockPath);
        InterProcessMutex readLock = rw.readLock();
        InterProcessMutex writeLock = rw.writeLock();
        Random random = new Random(seed);
        int reads = 0;
        int writes = 0;
        int maxReaders = 0;
        for (int op = 0; op < n; op++) {
            boolean write = random.nextInt(100) < writePercent;
            if (write) {
                writeLock.acquire();
                try {
                    doWrite(statePath, op);
                } finally {
                    writeLock.release();
                }
                writes++;
            } else {
                readLock.acquire();
                try {
                    maxReaders = Math.max(maxReaders, doRead(statePath, op));
                } finally {
                    readLock.release();
                }
                reads++;
            }
        }
        out("done reads=" + reads + " writes=" + writes + " max_concurrent_readers=" + maxReaders);
        return 0;
    }

    static void doWrite(String statePath, int op) throws Exception {
        State s = readState(statePath);
        if (s == null) {
            try {
                client.create().creatingParentContainersIfNeeded().forPath(statePath, encodeState(0, 0));
            } catch (KeeperException.NodeExistsException e) {
                throw violation("op=" + op + " write: " + statePath + " was created by someone else while we held the write lock");
            }
            s = readState(statePath);
            if (s == null) {
                throw violation("op=" + op + " write: " + statePath + " vanished while we held the write lock");
            }
        }
        if (s.readers != 0 || s.writers != 0) {
            throw violation("op=" + op + " write: state on entry " + s);
        }
        Stat st;
        try {
            st = client.setData().withVersion(s.version).forPath(statePath, encodeState(0, 1));
        } catch (KeeperException.BadVersionException e) {
            throw violation("op=" + op + " write: BadVersion setting \"0 1\" (expected version " + s.version + ")");
        }
        Thread.sleep(2);
        try {
            client.setData().withVersion(st.getVersion()).forPath(statePath, encodeState(0, 0));
        } catch (KeeperException.BadVersionException e) {
            throw violation("op=" + op + " write: BadVersion setting \"0 0\" (expected version " + st.getVersion() + ")");
        }
    }

    /** Returns the number of readers right after our increment. */
    static int doRead(String statePath, int op) throws Exception {
        int readersAfter = addReaders(statePath, op, +1);
        Thread.sleep(2);
        addReaders(statePath, op, -1);
        return readersAfter;
    }

    static int addReaders(String statePath, int op, int delta) throws Exception {
        while (true) {
            State s = readState(statePath);
            if (s == null) {
                if (delta < 0) {
                    throw violation("op=" + op + " read: " + statePath + " vanished while we were a reader");
                }
                try {
                    // Readers may race each other here; no writer can (we hold the read lock).
                    client.create().creatingParentContainersIfNeeded().forPath(statePath, encodeState(0, 0));
                } catch (KeeperException.NodeExistsException e) {
                    // another reader created it
                }
                continue;
            }
            if (s.writers != 0) {
                throw violation("op=" + op + " read: state " + s);
            }
            int readers = s.readers + delta;
            if (readers < 0) {
                throw violation("op=" + op + " read: readers would become negative, state " + s);
            }
            try {
                client.setData().withVersion(s.version).forPath(statePath, encodeState(readers, 0));
                return readers;
            } catch (KeeperException.BadVersionException e) {
                // a concurrent reader changed it; retry
            }
        }
    }
}
