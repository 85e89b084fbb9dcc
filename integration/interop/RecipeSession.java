// RecipeSession — the `session` mode of CuratorLockDriver: one Curator client, many recipe objects,
// driven by commands on stdin and reporting replies and events on stdout, for zkr's tests of its
// leader election, semaphore and multi-lock recipes against Curator 5.4 peers.
//
//   CuratorLockDriver session CONNECT
//
// ---------------------------------------------------------------------------------------------
// Output: one line per reply or event, flushed at once, each
//
//   KIND SEQ T_US REST...
//
//   KIND  ready | ok | err | ev | bye
//   SEQ   1, 2, 3, ... over every line of the process, in the order the lines are written
//   T_US  System.nanoTime()/1000, taken when the line is written (under the same lock as SEQ, so
//         T_US never decreases with SEQ). On Linux that is CLOCK_MONOTONIC in microseconds: the
//         same clock as C++'s std::chrono::steady_clock, so times of lines of different drivers
//         and of the test itself compare.
//
//   ready SEQ T_US SESSION_HEX          connected (the first line, SEQ 1)
//   ok    SEQ T_US TAG [RESULT...]      command TAG succeeded
//   err   SEQ T_US TAG KIND MESSAGE...  command TAG failed; KIND: usage | exists | unknown |
//                                       state | nonode | interrupted | timeout | exception;
//                                       MESSAGE is free text to the end of the line
//   ev    SEQ T_US NAME WHAT [ARG...]   an event of object NAME ("client" for the connection)
//   bye   SEQ T_US                      the last line, before exit 0 (after `exit` or end of input)
//
// Input: one command per line, `TAG VERB ARGS...`, whitespace-separated. TAG is any token chosen by
// the caller and echoed in the reply. Every command is answered by exactly one ok/err line; lines
// are not answered in input order (a blocking command replies when it is done). An event caused
// by a command may come before or after its ok, unless said below. Lines starting with # and
// empty lines are ignored; `TAG exit` or the end of input ends the process (its session with it:
// objects are not closed one by one, so no events follow `bye`).
//
// Tokens: paths are written as they are (no whitespace). Ids, node data and other free strings
// are encoded: bytes outside [A-Za-z0-9-._~/@+,:=] (UTF-8) as %XX, and the empty string as "".
// "-" stands for "no path" (null).
//
// Objects are named by the caller (NAME: a token, not "client"; creating a second object of a name
// is err exists, except that a closed latch, selector or count may be replaced by a new one of
// its kind). Each object has its own thread
// (its actor): commands that change it run there in order (Curator's mutexes must be released by
// the thread that acquired them); queries run on a shared pool and are never held up by a
// blocking command. Every blocking command takes a timeout in milliseconds.
//
// Commands (results after `ok TAG`):
//   ping                                  -> (nothing)
//   session                               -> SESSION_HEX
//   children PATH                         -> COUNT CHILD...     (sorted by name; err nonode)
//   get PATH                              -> DATA OWNER_HEX     (DATA encoded; owner 0 if persistent)
//   cancel NAME                           -> true|false         (interrupts NAME's running command)
//   close NAME [silent|notify]            -> (nothing)          (any object; see below)
//   exit                                  -> (nothing), then `bye`, exit 0
//
//  LeaderLatch  (new LeaderLatch(client, PATH, ID), a listener, start())
//   latch-start NAME PATH ID              -> (nothing)           after start() returned
//   latch-await NAME TIMEOUT_MS           -> true|false          await(TIMEOUT_MS) (false if closed)
//   latch-has NAME                        -> true|false          hasLeadership()
//   latch-info NAME                       -> STATE OUR_PATH LAST_PATH_IS_LEADER HAS_LEADERSHIP ID
//   latch-leader NAME                     -> ID true|false       getLeader()
//   latch-participants NAME               -> COUNT (ID true|false)...   getParticipants(), in order
//   close NAME [silent|notify]            close(CloseMode), default silent: `ev NAME closing`
//                                         first; with notify a leader's notLeader event comes
//                                         before the ok
//   events: ev NAME isLeader OUR_PATH     LeaderLatchListener.isLeader (OUR_PATH: getOurPath())
//           ev NAME notLeader OUR_PATH    LeaderLatchListener.notLeader
//           ev NAME closing
//
//  LeaderSelector (setId(ID), autoRequeue() if `requeue`, start())
//   selector-start NAME PATH ID requeue|once -> (nothing)
//   selector-release NAME                 -> TERM   the current takeLeadership returns (err state
//                                                   if not leading)
//   selector-requeue NAME                 -> true|false  requeue()
//   selector-interrupt NAME               -> (nothing)   interruptLeadership()
//   selector-has NAME                     -> true|false  hasLeadership()
//   selector-leader NAME                  -> ID true|false
//   selector-participants NAME            -> COUNT (ID true|false)...
//   close NAME                            close(); waits up to 10 s for a running takeLeadership
//                                         to end (so its `ended` event comes before the ok)
//   events: ev NAME leading TERM NODE     takeLeadership entered; TERM = 1, 2, ... per selector;
//                                         NODE: our mutex node (the first child by sequence, if
//                                         our session owns it; else -)
//           ev NAME ended TERM released|interrupted   just before takeLeadership returns
//           ev NAME state STATE           stateChanged; an error state of the client's
//                                         ConnectionStateErrorPolicy (Standard: SUSPENDED, LOST)
//                                         then cancels leadership, as LeaderSelectorListenerAdapter
//                                         does (the leader sees `ended TERM interrupted`)
//
//  GroupMember (new GroupMember(client, PATH, ID, PAYLOAD), start())
//   group-start NAME PATH ID PAYLOAD      -> (nothing)          after start() returned
//   group-members NAME                    -> COUNT (ID PAYLOAD)...  getCurrentMembers(), by id
//
//  PersistentTtlNode
//   ttlnode-start NAME PATH TTL_MS DATA   -> (nothing)          new PersistentTtlNode(client, PATH,
//                                         TTL_MS, DATA), after start() returned; `close NAME` closes it
//   ttlnode-wait NAME MS                  -> true|false         waitForInitialCreate(MS)
//   close NAME                            close(): its node is deleted
//
//  InterProcessSemaphoreV2
//   sem-create NAME PATH max MAX [DATA]   new InterProcessSemaphoreV2(client, PATH, MAX)
//   sem-create NAME PATH count COUNT_NAME [DATA]   ... (client, PATH, <SharedCount COUNT_NAME>)
//                                         DATA: setNodeData (encoded); default: Curator's
//   sem-acquire NAME QTY TIMEOUT_MS       -> acquired NODE... | timeout
//                                         acquire(QTY, TIMEOUT_MS); `ev NAME acquired NODE` per
//                                         lease before the ok. NODE = Lease.getNodeName(): the
//                                         lease node's name under PATH/leases (no path)
//   sem-leases NAME                       -> COUNT NODE...     the leases this object holds
//   sem-release NAME one|all|NODE         -> COUNT (how many returned; one: the oldest). Per lease
//                                         `ev NAME releasing NODE`, close(), `ev NAME released NODE`
//   sem-participants NAME                 -> COUNT NODE...     getParticipantNodes() (names under
//                                         PATH/leases, in the server's order)
//   sem-churn NAME CYCLES HOLD_MS TIMEOUT_MS -> CYCLES   CYCLES times: acquire one lease (timeout:
//                                         err timeout), `ev NAME acquired NODE`, hold HOLD_MS,
//                                         `ev NAME releasing NODE`, return it, `ev NAME released NODE`
//   close NAME                            returns every lease (with the events above)
//
//  SharedCount
//   count-start NAME PATH SEED            new SharedCount(client, PATH, SEED).start()
//   count-get NAME                        -> VALUE VERSION
//   count-set NAME VALUE                  setCount(VALUE)
//   count-try-set NAME VALUE              -> true|false   trySetCount(getVersionedValue(), VALUE)
//   close NAME
//   events: ev NAME count VALUE           SharedCountListener.countHasChanged
//
//  InterProcessMutex and InterProcessMultiLock (their own thread acquires and releases)
//   mutex-create NAME PATH
//   multi-create NAME PATH...             new InterProcessMultiLock(client, [PATH...])
//   mutex-acquire NAME TIMEOUT_MS         -> true NODE | false
//   multi-acquire NAME TIMEOUT_MS         -> true NODE... | false  (one per path, in order)
//                                         NODE: our lock node on that path, the first child by
//                                         sequence if our session owns it, else - (as for the
//                                         selector; read once, on the first of reentrant holds)
//   mutex-release NAME, multi-release NAME   `ev NAME releasing NODE...`, release(),
//                                         `ev NAME released NODE...` (reentrant: once per hold)
//   close NAME                            releases every hold
//   events: ev NAME acquired NODE... (each acquire, before its ok); ev NAME releasing NODE...;
//           ev NAME released NODE... (before the release's ok)
//
//  Connection: ev client state SUSPENDED|LOST|RECONNECTED|READ_ONLY
//
// Ordering across processes: an `acquired`/`leading`/`isLeader` line is written after the grant
// and a `releasing`/`ended`/`closing` line before the release is sent, so the interval between
// them lies inside the real holding time: if such intervals of different drivers overlap, the
// holds overlapped.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.framework.recipes.leader.CancelLeadershipException;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

final class RecipeSession {
    private RecipeSession() {
    }

    // ------------------------------------------------------------------ output

    private static final Object OUT_LOCK = new Object();
    private static long seq = 0;
    private static boolean finished = false;

    /** Writes `KIND SEQ T_US REST`; nothing after `bye`. */
    static void emit(String kind, String rest) {
        synchronized (OUT_LOCK) {
            if (finished) {
                return;
            }
            long t = System.nanoTime() / 1000;
            StringBuilder b = new StringBuilder(kind).append(' ').append(++seq).append(' ').append(t);
            if (rest != null && !rest.isEmpty()) {
                b.append(' ').append(rest);
            }
            System.out.print(b.append('\n'));
            System.out.flush();
            if (kind.equals("bye")) {
                finished = true;
            }
        }
    }

    static void event(String name, String what, String... args) {
        StringBuilder b = new StringBuilder(name).append(' ').append(what);
        for (String a : args) {
            b.append(' ').append(a);
        }
        emit("ev", b.toString());
    }

    // ------------------------------------------------------------------ tokens

    private static final String SAFE = "-._~/@+,:=";

    static String enc(String s) {
        if (s == null || s.isEmpty()) {
            return "\"\"";
        }
        StringBuilder b = new StringBuilder();
        for (byte x : s.getBytes(StandardCharsets.UTF_8)) {
            int c = x & 0xff;
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || SAFE.indexOf(c) >= 0) {
                b.append((char) c);
            } else {
                b.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)))
                        .append(Character.toUpperCase(Character.forDigit(c & 15, 16)));
            }
        }
        return b.toString();
    }

    static String enc(byte[] data) {
        return enc(data == null ? "" : new String(data, StandardCharsets.UTF_8));
    }

    static String dec(String t) {
        if (t.equals("\"\"")) {
            return "";
        }
        byte[] out = new byte[t.length()];
        int n = 0;
        byte[] raw = t.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < raw.length; i++) {
            if (raw[i] == '%') {
                if (i + 2 >= raw.length) {
                    throw new Fail("usage", "bad %-escape in '" + t + "'");
                }
                int hi = Character.digit(raw[i + 1], 16), lo = Character.digit(raw[i + 2], 16);
                if (hi < 0 || lo < 0) {
                    throw new Fail("usage", "bad %-escape in '" + t + "'");
                }
                out[n++] = (byte) (hi * 16 + lo);
                i += 2;
            } else {
                out[n++] = raw[i];
            }
        }
        return new String(out, 0, n, StandardCharsets.UTF_8);
    }

    static String pathOrDash(String p) {
        return p == null || p.isEmpty() ? "-" : p;
    }

    // ------------------------------------------------------------------ failures

    /** A command failure with its err KIND. */
    static final class Fail extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final String kind;

        Fail(String kind, String message) {
            super(message);
            this.kind = kind;
        }
    }

    static Fail usage(String m) {
        return new Fail("usage", m);
    }

    // ------------------------------------------------------------------ objects

    interface Task {
        String run() throws Exception;
    }

    /** One thread per object: commands that change it run there, in order. */
    static final class Actor {
        final ExecutorService exec;
        volatile Thread running;

        Actor(String name) {
            exec = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "obj-" + name);
                t.setDaemon(true);
                return t;
            });
        }
    }

    abstract static class Obj {
        final String name;
        final Actor actor;

        Obj(String name) {
            this.name = name;
            this.actor = new Actor(name);
        }

        /** Whether a new object may take this one's name (a closed latch or selector may be replaced). */
        boolean replaceable() {
            return false;
        }

        /** Runs on the actor. */
        abstract void close(String arg) throws Exception;
    }

    static CuratorFramework client;
    static final Map<String, Obj> objects = new ConcurrentHashMap<>();
    static final ExecutorService pool = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "query");
        t.setDaemon(true);
        return t;
    });

    static void reply(String tag, Task task) {
        try {
            String r = task.run();
            emit("ok", tag + (r == null || r.isEmpty() ? "" : " " + r));
        } catch (Fail f) {
            emit("err", tag + " " + f.kind + " " + oneLine(f.getMessage()));
        } catch (InterruptedException e) {
            emit("err", tag + " interrupted " + oneLine(String.valueOf(e.getMessage())));
        } catch (KeeperException.NoNodeException e) {
            emit("err", tag + " nonode " + oneLine(e.toString()));
        } catch (Throwable e) {
            emit("err", tag + " exception " + oneLine(e.toString()));
        }
    }

    static String oneLine(String s) {
        return s == null ? "" : s.replaceAll("[\\r\\n]+", " ");
    }

    static void onActor(Obj o, String tag, Task task) {
        o.actor.exec.execute(() -> {
            o.actor.running = Thread.currentThread();
            try {
                reply(tag, task);
            } finally {
                o.actor.running = null;
                Thread.interrupted(); // a late `cancel` must not hit the next command
            }
        });
    }

    static void onPool(String tag, Task task) {
        pool.execute(() -> reply(tag, task));
    }

    @SuppressWarnings("unchecked")
    static <T extends Obj> T get(String name, Class<T> type) {
        Obj o = objects.get(name);
        if (o == null) {
            throw new Fail("unknown", "no object named '" + name + "'");
        }
        if (!type.isInstance(o)) {
            throw new Fail("usage", "'" + name + "' is a " + o.getClass().getSimpleName() + ", not a " + type.getSimpleName());
        }
        return (T) o;
    }

    static void register(Obj o) {
        if (o.name.equals("client")) {
            throw usage("'client' is reserved");
        }
        Obj old = objects.get(o.name);
        if (old != null && !old.replaceable()) {
            throw new Fail("exists", "an object named '" + o.name + "' exists");
        }
        objects.put(o.name, o);
        if (old != null) {
            old.actor.exec.shutdown();
        }
    }

    // ------------------------------------------------------------------ helpers

    static long sessionId() throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionId();
    }

    /** The sequence part of a contender node: the text after the last `marker`. */
    static String sequenceOf(String node, String marker) {
        int at = node.lastIndexOf(marker);
        return at < 0 ? node : node.substring(at + marker.length());
    }

    /** The first child of `path` by sequence, if our session owns it; else "-". */
    static String firstOwnNode(String path, String marker) throws Exception {
        List<String> children;
        try {
            children = new ArrayList<>(client.getChildren().forPath(path));
        } catch (KeeperException.NoNodeException e) {
            return "-";
        }
        if (children.isEmpty()) {
            return "-";
        }
        children.sort((a, b) -> sequenceOf(a, marker).compareTo(sequenceOf(b, marker)));
        String first = path.equals("/") ? "/" + children.get(0) : path + "/" + children.get(0);
        Stat st = client.checkExists().forPath(first);
        return st != null && st.getEphemeralOwner() == sessionId() ? first : "-";
    }

    static String participants(Collection<Participant> ps) {
        StringBuilder b = new StringBuilder().append(ps.size());
        for (Participant p : ps) {
            b.append(' ').append(enc(p.getId())).append(' ').append(p.isLeader());
        }
        return b.toString();
    }

    static int intArg(String s, String what, int min) {
        int v;
        try {
            v = Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw usage(what + " must be an integer, got '" + s + "'");
        }
        if (v < min) {
            throw usage(what + " must be >= " + min + ", got " + v);
        }
        return v;
    }

    static long timeoutArg(String s) {
        return intArg(s, "TIMEOUT_MS", 0);
    }

    // ------------------------------------------------------------------ LeaderLatch

    static final class LatchObj extends Obj {
        final LeaderLatch latch;

        LatchObj(String name, String path, String id) {
            super(name);
            latch = new LeaderLatch(client, path, id);
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    event(name, "isLeader", pathOrDash(latch.getOurPath()));
                }

                @Override
                public void notLeader() {
                    event(name, "notLeader", pathOrDash(latch.getOurPath()));
                }
            });
        }

        @Override
        boolean replaceable() {
            return latch.getState() == LeaderLatch.State.CLOSED;
        }

        @Override
        void close(String arg) throws Exception {
            LeaderLatch.CloseMode mode;
            if (arg == null || arg.equals("silent")) {
                mode = LeaderLatch.CloseMode.SILENT;
            } else if (arg.equals("notify")) {
                mode = LeaderLatch.CloseMode.NOTIFY_LEADER;
            } else {
                throw usage("close of a latch: silent|notify");
            }
            event(name, "closing");
            latch.close(mode);
        }
    }

    // ------------------------------------------------------------------ GroupMember
    static final class GroupObj extends Obj {
        final GroupMember member;

        GroupObj(String name, String path, String id, byte[] payload) {
            super(name);
            member = new GroupMember(client, path, id, payload);
        }

        @Override
        void close(String arg) throws Exception {
            member.close();
        }
    }

    // ------------------------------------------------------------------ barriers, counters

    static final class BarrierObj extends Obj {
        final DistributedBarrier barrier;

        BarrierObj(String name, String path) {
            super(name);
            barrier = new DistributedBarrier(client, path);
        }

        @Override
        void close(String arg) {
        }
    }

    static final class TtlNodeObj extends Obj {
        final PersistentTtlNode node;

        TtlNodeObj(String name, String path, long ttlMs, byte[] data) {
            super(name);
            node = new PersistentTtlNode(client, path, ttlMs, data);
        }

        @Override
        void close(String arg) {
            node.close();
        }
    }

    static final class DoubleBarrierObj extends Obj {
        final DistributedDoubleBarrier barrier;

        DoubleBarrierObj(String name, String path, int members) {
            super(name);
            barrier = new DistributedDoubleBarrier(client, path, members);
        }

        @Override
        void close(String arg) {
        }
    }

    static final class AtomicLongObj extends Obj {
        final DistributedAtomicLong value;

        AtomicLongObj(String name, String path) {
            super(name);
            // Contention is retried (as zkr's counter does); connection loss is not Curator's to retry.
            value = new DistributedAtomicLong(client, path, new RetryNTimes(1000, 1));
        }

        @Override
        void close(String arg) {
        }
    }

    static String atomicResult(AtomicValue<Long> v) {
        return v.succeeded() + " " + v.preValue() + " " + v.postValue();
    }

    // ------------------------------------------------------------------ LeaderSelector

    static final class SelectorObj extends Obj {
        final String path;
        final LeaderSelector selector;
        final AtomicLong terms = new AtomicLong();
        volatile Term current;
        volatile CountDownLatch leaderRunning = new CountDownLatch(0);

        static final class Term {
            final long n;
            final CountDownLatch release = new CountDownLatch(1);

            Term(long n) {
                this.n = n;
            }
        }

        SelectorObj(String name, String path, String id, boolean requeue) {
            super(name);
            this.path = path;
            selector = new LeaderSelector(client, path, new LeaderSelectorListener() {
                @Override
                public void takeLeadership(CuratorFramework c) throws Exception {
                    CountDownLatch running = new CountDownLatch(1);
                    leaderRunning = running;
                    Term t = new Term(terms.incrementAndGet());
                    try {
                        String node;
                        try {
                            node = firstOwnNode(path, "lock-");
                        } catch (InterruptedException e) {
                            throw e;
                        } catch (Exception e) {
                            node = "-";
                        }
                        current = t;
                        event(name, "leading", Long.toString(t.n), node);
                        try {
                            t.release.await();
                        } catch (InterruptedException e) {
                            event(name, "ended", Long.toString(t.n), "interrupted");
                            throw e;
                        }
                        event(name, "ended", Long.toString(t.n), "released");
                    } finally {
                        current = null;
                        running.countDown();
                    }
                }

                @Override
                public void stateChanged(CuratorFramework c, ConnectionState s) {
                    event(name, "state", s.name());
                    if (c.getConnectionStateErrorPolicy().isErrorState(s)) {
                        throw new CancelLeadershipException();
                    }
                }
            });
            selector.setId(id);
            if (requeue) {
                selector.autoRequeue();
            }
        }

        volatile boolean closed;

        @Override
        boolean replaceable() {
            return closed;
        }

        @Override
        void close(String arg) throws Exception {
            if (arg != null) {
                throw usage("close of a selector takes no argument");
            }
            event(name, "closing");
            closed = true;
            selector.close();
            if (!leaderRunning.await(10, TimeUnit.SECONDS)) {
                throw new Fail("state", "takeLeadership still running 10 s after close()");
            }
        }
    }

    // ------------------------------------------------------------------ SharedCount

    static final class CountObj extends Obj {
        final SharedCount count;
        volatile boolean closed;

        CountObj(String name, String path, int seed) {
            super(name);
            count = new SharedCount(client, path, seed);
            count.addListener(new SharedCountListener() {
                @Override
                public void countHasChanged(SharedCountReader reader, int value) {
                    event(name, "count", Integer.toString(value));
                }

                @Override
                public void stateChanged(CuratorFramework c, ConnectionState s) {
                    // reported once, as `ev client state`
                }
            });
        }

        @Override
        boolean replaceable() {
            return closed;
        }

        @Override
        void close(String arg) throws Exception {
            closed = true;
            count.close();
        }
    }

    // ------------------------------------------------------------------ InterProcessSemaphoreV2

    static final class SemObj extends Obj {
        final InterProcessSemaphoreV2 sem;
        final Deque<Lease> leases = new ArrayDeque<>(); // guarded by itself

        SemObj(String name, InterProcessSemaphoreV2 sem) {
            super(name);
            this.sem = sem;
        }

        List<Lease> take(String which) {
            List<Lease> out = new ArrayList<>();
            synchronized (leases) {
                if (which.equals("all")) {
                    out.addAll(leases);
                    leases.clear();
                } else if (which.equals("one")) {
                    Lease l = leases.pollFirst();
                    if (l != null) {
                        out.add(l);
                    }
                } else {
                    for (Lease l : leases) {
                        if (l.getNodeName().equals(which)) {
                            out.add(l);
                        }
                    }
                    leases.removeAll(out);
                    if (out.isEmpty()) {
                        throw new Fail("state", name + " holds no lease " + which);
                    }
                }
            }
            return out;
        }

        int release(String which) throws Exception {
            List<Lease> ls = take(which);
            Exception first = null;
            for (Lease l : ls) {
                String node = l.getNodeName();
                event(name, "releasing", node);
                try {
                    sem.returnLease(l); // closes it; a failure is logged by Curator
                } catch (Exception e) {
                    if (first == null) {
                        first = e;
                    }
                }
                event(name, "released", node);
            }
            if (first != null) {
                throw first;
            }
            return ls.size();
        }

        List<String> acquire(int qty, long timeoutMs) throws Exception {
            Collection<Lease> got = sem.acquire(qty, timeoutMs, TimeUnit.MILLISECONDS);
            if (got == null) {
                return null;
            }
            List<String> nodes = new ArrayList<>();
            synchronized (leases) {
                for (Lease l : got) {
                    leases.addLast(l);
                    nodes.add(l.getNodeName());
                }
            }
            for (String n : nodes) {
                event(name, "acquired", n);
            }
            return nodes;
        }

        @Override
        void close(String arg) throws Exception {
            release("all");
        }
    }

    // ------------------------------------------------------------------ mutex, multi-lock

    static final class LockObj extends Obj {
        final InterProcessMutex mutex; // null for a multi-lock
        final InterProcessMultiLock multi;
        final List<String> paths; // the mutex's one path, or the multi-lock's paths
        int holds; // only touched on the actor
        String nodes = ""; // our nodes while held (space-separated), only touched on the actor

        LockObj(String name, List<String> paths, InterProcessMutex mutex, InterProcessMultiLock multi) {
            super(name);
            this.paths = paths;
            this.mutex = mutex;
            this.multi = multi;
        }

        String acquire(long timeoutMs) throws Exception {
            boolean ok = mutex != null ? mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS)
                    : multi.acquire(timeoutMs, TimeUnit.MILLISECONDS);
            if (!ok) {
                return "false";
            }
            if (holds++ == 0) {
                List<String> ns = new ArrayList<>();
                for (String p : paths) {
                    ns.add(firstOwnNode(p, "lock-"));
                }
                nodes = String.join(" ", ns);
            }
            event(name, "acquired", nodes);
            return "true " + nodes;
        }

        void release() throws Exception {
            if (holds == 0) {
                throw new Fail("state", name + " is not held");
            }
            String ns = nodes;
            event(name, "releasing", ns);
            holds--;
            if (mutex != null) {
                mutex.release();
            } else {
                multi.release();
            }
            event(name, "released", ns);
        }

        @Override
        void close(String arg) throws Exception {
            while (holds > 0) {
                release();
            }
        }
    }

    // ------------------------------------------------------------------ commands

    static void need(String[] a, int min, int max, String usage) {
        if (a.length - 2 < min || (max >= 0 && a.length - 2 > max)) {
            throw usage(usage);
        }
    }

    static void dispatch(String tag, String verb, String[] a) {
        switch (verb) {
            case "ping":
                need(a, 0, 0, "ping");
                emit("ok", tag);
                return;
            case "session":
                need(a, 0, 0, "session");
                onPool(tag, () -> Long.toHexString(sessionId()));
                return;
            case "children": {
                need(a, 1, 1, "children PATH");
                String path = a[2];
                onPool(tag, () -> {
                    List<String> cs = new ArrayList<>(client.getChildren().forPath(path));
                    cs.sort(null);
                    return cs.size() + (cs.isEmpty() ? "" : " " + String.join(" ", cs));
                });
                return;
            }
            case "get": {
                need(a, 1, 1, "get PATH");
                String path = a[2];
                onPool(tag, () -> {
                    Stat st = new Stat();
                    byte[] data = client.getData().storingStatIn(st).forPath(path);
                    return enc(data) + " " + Long.toHexString(st.getEphemeralOwner());
                });
                return;
            }
            case "cancel": {
                need(a, 1, 1, "cancel NAME");
                Obj o = get(a[2], Obj.class);
                Thread t = o.actor.running;
                if (t != null) {
                    t.interrupt();
                }
                emit("ok", tag + " " + (t != null));
                return;
            }
            case "close": {
                need(a, 1, 2, "close NAME [silent|notify]");
                Obj o = get(a[2], Obj.class);
                String arg = a.length > 3 ? a[3] : null;
                onActor(o, tag, () -> {
                    o.close(arg);
                    return null;
                });
                return;
            }

            // ---- LeaderLatch
            case "latch-start": {
                need(a, 3, 3, "latch-start NAME PATH ID");
                LatchObj o = new LatchObj(a[2], a[3], dec(a[4]));
                register(o);
                onActor(o, tag, () -> {
                    o.latch.start();
                    return null;
                });
                return;
            }
            case "latch-await": {
                need(a, 2, 2, "latch-await NAME TIMEOUT_MS");
                LatchObj o = get(a[2], LatchObj.class);
                long t = timeoutArg(a[3]);
                onPool(tag, () -> Boolean.toString(o.latch.await(t, TimeUnit.MILLISECONDS)));
                return;
            }
            case "latch-has": {
                need(a, 1, 1, "latch-has NAME");
                LatchObj o = get(a[2], LatchObj.class);
                emit("ok", tag + " " + o.latch.hasLeadership());
                return;
            }
            case "latch-info": {
                need(a, 1, 1, "latch-info NAME");
                LatchObj o = get(a[2], LatchObj.class);
                LeaderLatch l = o.latch;
                emit("ok", tag + " " + l.getState() + " " + pathOrDash(l.getOurPath()) + " " + pathOrDash(l.getLastPathIsLeader())
                        + " " + l.hasLeadership() + " " + enc(l.getId()));
                return;
            }
            case "latch-leader": {
                need(a, 1, 1, "latch-leader NAME");
                LatchObj o = get(a[2], LatchObj.class);
                onPool(tag, () -> {
                    Participant p = o.latch.getLeader();
                    return enc(p.getId()) + " " + p.isLeader();
                });
                return;
            }
            case "latch-participants": {
                need(a, 1, 1, "latch-participants NAME");
                LatchObj o = get(a[2], LatchObj.class);
                onPool(tag, () -> participants(o.latch.getParticipants()));
                return;
            }

            // ---- GroupMember
            case "group-start": {
                need(a, 4, 4, "group-start NAME PATH ID PAYLOAD");
                GroupObj o = new GroupObj(a[2], a[3], dec(a[4]), dec(a[5]).getBytes(StandardCharsets.UTF_8));
                register(o);
                onActor(o, tag, () -> {
                    o.member.start();
                    return null;
                });
                return;
            }
            case "group-members": {
                need(a, 1, 1, "group-members NAME");
                GroupObj o = get(a[2], GroupObj.class);
                onPool(tag, () -> {
                    List<String> out = new ArrayList<>();
                    for (Map.Entry<String, byte[]> e : new java.util.TreeMap<>(o.member.getCurrentMembers()).entrySet()) {
                        out.add(enc(e.getKey()) + " " + enc(e.getValue()));
                    }
                    return out.size() + (out.isEmpty() ? "" : " " + String.join(" ", out));
                });
                return;
            }

            // ---- DistributedBarrier
            case "barrier-new": {
                need(a, 2, 2, "barrier-new NAME PATH");
                register(new BarrierObj(a[2], a[3]));
                emit("ok", tag);
                return;
            }
            case "barrier-set": {
                need(a, 1, 1, "barrier-set NAME");
                BarrierObj o = get(a[2], BarrierObj.class);
                onPool(tag, () -> {
                    o.barrier.setBarrier();
                    return null;
                });
                return;
            }
            case "barrier-remove": {
                need(a, 1, 1, "barrier-remove NAME");
                BarrierObj o = get(a[2], BarrierObj.class);
                onPool(tag, () -> {
                    o.barrier.removeBarrier();
                    return null;
                });
                return;
            }
            case "barrier-wait": {
                need(a, 2, 2, "barrier-wait NAME MS");
                BarrierObj o = get(a[2], BarrierObj.class);
                long ms = Long.parseLong(a[3]);
                onActor(o, tag, () -> Boolean.toString(o.barrier.waitOnBarrier(ms, TimeUnit.MILLISECONDS)));
                return;
            }

            // ---- PersistentTtlNode
            case "ttlnode-start": {
                need(a, 4, 4, "ttlnode-start NAME PATH TTL_MS DATA");
                TtlNodeObj o = new TtlNodeObj(a[2], a[3], Long.parseLong(a[4]), dec(a[5]).getBytes(StandardCharsets.UTF_8));
                register(o);
                onActor(o, tag, () -> {
                    o.node.start();
                    return null;
                });
                return;
            }
            case "ttlnode-wait": {
                need(a, 2, 2, "ttlnode-wait NAME MS");
                TtlNodeObj o = get(a[2], TtlNodeObj.class);
                long ms = Long.parseLong(a[3]);
                onActor(o, tag, () -> Boolean.toString(o.node.waitForInitialCreate(ms, TimeUnit.MILLISECONDS)));
                return;
            }

            // ---- DistributedDoubleBarrier
            case "dbarrier-new": {
                need(a, 3, 3, "dbarrier-new NAME PATH MEMBERS");
                register(new DoubleBarrierObj(a[2], a[3], intArg(a[4], "MEMBERS", 1)));
                emit("ok", tag);
                return;
            }
            case "dbarrier-enter": {
                need(a, 2, 2, "dbarrier-enter NAME MS");
                DoubleBarrierObj o = get(a[2], DoubleBarrierObj.class);
                long ms = Long.parseLong(a[3]);
                onActor(o, tag, () -> Boolean.toString(o.barrier.enter(ms, TimeUnit.MILLISECONDS)));
                return;
            }
            case "dbarrier-leave": {
                need(a, 2, 2, "dbarrier-leave NAME MS");
                DoubleBarrierObj o = get(a[2], DoubleBarrierObj.class);
                long ms = Long.parseLong(a[3]);
                onActor(o, tag, () -> Boolean.toString(o.barrier.leave(ms, TimeUnit.MILLISECONDS)));
                return;
            }

            // ---- DistributedAtomicLong
            case "along-new": {
                need(a, 2, 2, "along-new NAME PATH");
                register(new AtomicLongObj(a[2], a[3]));
                emit("ok", tag);
                return;
            }
            case "along-get": {
                need(a, 1, 1, "along-get NAME");
                AtomicLongObj o = get(a[2], AtomicLongObj.class);
                onActor(o, tag, () -> atomicResult(o.value.get()));
                return;
            }
            case "along-add": {
                need(a, 2, 2, "along-add NAME DELTA");
                AtomicLongObj o = get(a[2], AtomicLongObj.class);
                long delta = Long.parseLong(a[3]);
                onActor(o, tag, () -> atomicResult(o.value.add(delta)));
                return;
            }
            case "along-increments": {
                need(a, 2, 2, "along-increments NAME TIMES");
                AtomicLongObj o = get(a[2], AtomicLongObj.class);
                int times = intArg(a[3], "TIMES", 0);
                onActor(o, tag, () -> {
                    int succeeded = 0;
                    for (int i = 0; i < times; ++i) {
                        if (o.value.increment().succeeded()) {
                            ++succeeded;
                        }
                    }
                    return Integer.toString(succeeded);
                });
                return;
            }

            // ---- LeaderSelector
            case "selector-start": {
                need(a, 4, 4, "selector-start NAME PATH ID requeue|once");
                if (!a[5].equals("requeue") && !a[5].equals("once")) {
                    throw usage("selector-start NAME PATH ID requeue|once");
                }
                SelectorObj o = new SelectorObj(a[2], a[3], dec(a[4]), a[5].equals("requeue"));
                register(o);
                onActor(o, tag, () -> {
                    o.selector.start();
                    return null;
                });
                return;
            }
            case "selector-release": {
                need(a, 1, 1, "selector-release NAME");
                SelectorObj o = get(a[2], SelectorObj.class);
                SelectorObj.Term t = o.current;
                if (t == null) {
                    throw new Fail("state", o.name + " is not in takeLeadership");
                }
                t.release.countDown();
                emit("ok", tag + " " + t.n);
                return;
            }
            case "selector-requeue": {
                need(a, 1, 1, "selector-requeue NAME");
                SelectorObj o = get(a[2], SelectorObj.class);
                onActor(o, tag, () -> Boolean.toString(o.selector.requeue()));
                return;
            }
            case "selector-interrupt": {
                need(a, 1, 1, "selector-interrupt NAME");
                SelectorObj o = get(a[2], SelectorObj.class);
                onActor(o, tag, () -> {
                    o.selector.interruptLeadership();
                    return null;
                });
                return;
            }
            case "selector-has": {
                need(a, 1, 1, "selector-has NAME");
                SelectorObj o = get(a[2], SelectorObj.class);
                emit("ok", tag + " " + o.selector.hasLeadership());
                return;
            }
            case "selector-leader": {
                need(a, 1, 1, "selector-leader NAME");
                SelectorObj o = get(a[2], SelectorObj.class);
                onPool(tag, () -> {
                    Participant p = o.selector.getLeader();
                    return enc(p.getId()) + " " + p.isLeader();
                });
                return;
            }
            case "selector-participants": {
                need(a, 1, 1, "selector-participants NAME");
                SelectorObj o = get(a[2], SelectorObj.class);
                onPool(tag, () -> participants(o.selector.getParticipants()));
                return;
            }

            // ---- SharedCount
            case "count-start": {
                need(a, 3, 3, "count-start NAME PATH SEED");
                CountObj o = new CountObj(a[2], a[3], intArg(a[4], "SEED", Integer.MIN_VALUE));
                register(o);
                onActor(o, tag, () -> {
                    o.count.start();
                    return null;
                });
                return;
            }
            case "count-get": {
                need(a, 1, 1, "count-get NAME");
                CountObj o = get(a[2], CountObj.class);
                var v = o.count.getVersionedValue();
                emit("ok", tag + " " + v.getValue() + " " + v.getVersion());
                return;
            }
            case "count-set": {
                need(a, 2, 2, "count-set NAME VALUE");
                CountObj o = get(a[2], CountObj.class);
                int value = intArg(a[3], "VALUE", Integer.MIN_VALUE);
                onActor(o, tag, () -> {
                    o.count.setCount(value);
                    return null;
                });
                return;
            }
            case "count-try-set": {
                need(a, 2, 2, "count-try-set NAME VALUE");
                CountObj o = get(a[2], CountObj.class);
                int value = intArg(a[3], "VALUE", Integer.MIN_VALUE);
                onActor(o, tag, () -> Boolean.toString(o.count.trySetCount(o.count.getVersionedValue(), value)));
                return;
            }

            // ---- InterProcessSemaphoreV2
            case "sem-create": {
                need(a, 4, 5, "sem-create NAME PATH max MAX [DATA] | sem-create NAME PATH count COUNT_NAME [DATA]");
                InterProcessSemaphoreV2 sem;
                if (a[4].equals("max")) {
                    sem = new InterProcessSemaphoreV2(client, a[3], intArg(a[5], "MAX", 1));
                } else if (a[4].equals("count")) {
                    sem = new InterProcessSemaphoreV2(client, a[3], get(a[5], CountObj.class).count);
                } else {
                    throw usage("sem-create NAME PATH max MAX | count COUNT_NAME");
                }
                if (a.length > 6) {
                    sem.setNodeData(dec(a[6]).getBytes(StandardCharsets.UTF_8));
                }
                register(new SemObj(a[2], sem));
                emit("ok", tag);
                return;
            }
            case "sem-acquire": {
                need(a, 3, 3, "sem-acquire NAME QTY TIMEOUT_MS");
                SemObj o = get(a[2], SemObj.class);
                int qty = intArg(a[3], "QTY", 1);
                long t = timeoutArg(a[4]);
                onActor(o, tag, () -> {
                    List<String> nodes = o.acquire(qty, t);
                    return nodes == null ? "timeout" : "acquired " + String.join(" ", nodes);
                });
                return;
            }
            case "sem-leases": {
                need(a, 1, 1, "sem-leases NAME");
                SemObj o = get(a[2], SemObj.class);
                StringBuilder b = new StringBuilder(tag);
                synchronized (o.leases) {
                    b.append(' ').append(o.leases.size());
                    for (Lease l : o.leases) {
                        b.append(' ').append(l.getNodeName());
                    }
                }
                emit("ok", b.toString());
                return;
            }
            case "sem-release": {
                need(a, 2, 2, "sem-release NAME one|all|NODE");
                SemObj o = get(a[2], SemObj.class);
                String which = a[3];
                onPool(tag, () -> Integer.toString(o.release(which)));
                return;
            }
            case "sem-participants": {
                need(a, 1, 1, "sem-participants NAME");
                SemObj o = get(a[2], SemObj.class);
                onPool(tag, () -> {
                    List<String> ps = new ArrayList<>(o.sem.getParticipantNodes());
                    return ps.size() + (ps.isEmpty() ? "" : " " + String.join(" ", ps));
                });
                return;
            }
            case "sem-churn": {
                need(a, 4, 4, "sem-churn NAME CYCLES HOLD_MS TIMEOUT_MS");
                SemObj o = get(a[2], SemObj.class);
                int cycles = intArg(a[3], "CYCLES", 0);
                int holdMs = intArg(a[4], "HOLD_MS", 0);
                long t = timeoutArg(a[5]);
                onActor(o, tag, () -> {
                    for (int i = 0; i < cycles; i++) {
                        List<String> nodes = o.acquire(1, t);
                        if (nodes == null) {
                            throw new Fail("timeout", "cycle " + i + ": no lease within " + t + " ms");
                        }
                        if (holdMs > 0) {
                            Thread.sleep(holdMs);
                        }
                        o.release(nodes.get(0));
                    }
                    return Integer.toString(cycles);
                });
                return;
            }

            // ---- mutex, multi-lock
            case "mutex-create": {
                need(a, 2, 2, "mutex-create NAME PATH");
                register(new LockObj(a[2], List.of(a[3]), new InterProcessMutex(client, a[3]), null));
                emit("ok", tag);
                return;
            }
            case "multi-create": {
                need(a, 2, -1, "multi-create NAME PATH...");
                List<String> paths = new ArrayList<>(Arrays.asList(a).subList(3, a.length));
                register(new LockObj(a[2], paths, null, new InterProcessMultiLock(client, paths)));
                emit("ok", tag);
                return;
            }
            case "mutex-acquire":
            case "multi-acquire": {
                need(a, 2, 2, verb + " NAME TIMEOUT_MS");
                LockObj o = get(a[2], LockObj.class);
                if ((o.mutex != null) != verb.equals("mutex-acquire")) {
                    throw usage(o.name + " is not a " + verb.substring(0, verb.indexOf('-')));
                }
                long t = timeoutArg(a[3]);
                onActor(o, tag, () -> o.acquire(t));
                return;
            }
            case "mutex-release":
            case "multi-release": {
                need(a, 1, 1, verb + " NAME");
                LockObj o = get(a[2], LockObj.class);
                onActor(o, tag, () -> {
                    o.release();
                    return null;
                });
                return;
            }
            default:
                throw usage("unknown command '" + verb + "'");
        }
    }

    // ------------------------------------------------------------------ main loop

    static int run(CuratorFramework c) throws Exception {
        client = c;
        c.getConnectionStateListenable().addListener((cf, state) -> {
            if (state != ConnectionState.CONNECTED) {
                event("client", "state", state.name());
            }
        });
        emit("ready", Long.toHexString(sessionId()));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] a = line.split("\\s+");
            String tag = a[0];
            if (a.length < 2) {
                emit("err", tag + " usage missing command");
                continue;
            }
            if (a[1].equals("exit")) {
                emit("ok", tag);
                break;
            }
            try {
                dispatch(tag, a[1], a);
            } catch (Fail f) {
                emit("err", tag + " " + f.kind + " " + oneLine(f.getMessage()));
            } catch (RuntimeException e) {
                emit("err", tag + " exception " + oneLine(e.toString()));
            }
        }
        // The session's end removes every ephemeral node; objects are not closed one by one (a
        // selector's or latch's close would report events after the caller stopped listening).
        emit("bye", null);
        return 0;
    }

    /** Loads the classes a session loads (for the class-data-sharing archive); no server. */
    static void warmup(CuratorFramework c) throws Exception {
        client = c;
        new LatchObj("w1", "/warmup/latch", "id");
        new SelectorObj("w2", "/warmup/sel", "id", true);
        CountObj count = new CountObj("w3", "/warmup/count", 1);
        new SemObj("w4", new InterProcessSemaphoreV2(c, "/warmup/sem", count.count));
        new LockObj("w5", List.of("/warmup/m"), new InterProcessMutex(c, "/warmup/m"), null);
        new LockObj("w6", List.of("/warmup/a", "/warmup/b"), null, new InterProcessMultiLock(c, List.of("/warmup/a", "/warmup/b")));
        dec(enc("a b%\"é"));
        participants(List.of(new Participant("x", true)));
        client = null;
    }
}
