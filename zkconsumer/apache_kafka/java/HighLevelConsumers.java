// Kafka 0.8.2.2's own high-level consumer (kafka.javaapi.consumer.ZookeeperConsumerConnector), several members in
// one JVM, driven line by line on stdin and reporting JSON lines on stdout. Compiled against Kafka's jars by
// zkconsumer.apache_kafka.jars (never committed as a class file); zkconsumer.apache_kafka.processes runs it.
//
// Arguments: --zookeeper Z --group G (--topic T ... | --whitelist REGEX) [--streams N] [--strategy range|roundrobin]
//            [--property key=value ...] [--no-fetch] [--records] [--start ID ...] [--until-signal] [--warm-up N]
// --warm-up N: before "ready", N times a member joins group G-warm-up alone, consumes for 200 ms and leaves, so the
//              members that follow run a JVM that has loaded and compiled the join's code (a long-running
//              application's JVM), not a cold one; one "warmed" event per round with its createMessageStreams ms
// --until-signal: no commands; the members given with --start run until SIGTERM (each leaves gracefully: a
//                 deploy's stop) or SIGKILL (a crash), as one consumer process per member runs in production
// Commands on stdin, one per line:
//   start ID    a member with consumer.id=ID: createMessageStreams, one thread per stream
//   spawn ID    the same on a thread of its own: the next command is read at once (members starting together)
//   stop ID     a graceful leave: ConsumerConnector.shutdown() (commits when auto.commit.enable, deregisters)
//   crash ID    the member's ZooKeeper session is closed without a shutdown (its ephemeral nodes vanish at once,
//               as after kill -9 once the session timed out); its threads are left as they are
//   commit ID   ConsumerConnector.commitOffsets()
//   exit        stop every member, then exit
// With --until-signal, a member whose start fails (createMessageStreams threw) ends its process with status 1 and no
// shutdown, as an application's main() that lets the exception out does.
// Events on stdout: {"event":"started"|"stopped"|"crashed"|"committed"|"error",...} and, with --records, one
// {"event":"record","id":ID,"stream":S,"topic":T,"partition":P,"offset":O} per record handed to a stream.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import kafka.consumer.Consumer;
import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.KafkaStream;
import kafka.consumer.Whitelist;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.javaapi.consumer.ZookeeperConsumerConnector;
import kafka.message.MessageAndMetadata;

public final class HighLevelConsumers {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private static final Map<String, ConsumerConnector> MEMBERS = new LinkedHashMap<>();

    private static String zookeeper, group, whitelist, strategy = "range";
    private static final List<String> TOPICS = new ArrayList<>();
    private static final Map<String, String> PROPS = new LinkedHashMap<>();
    private static int streams = 1;
    private static boolean fetch = true, records = false, untilSignal = false;
    private static int warmUp = 0;

    public static void main(String[] args) throws Exception {
        List<String> initial = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--zookeeper": zookeeper = args[++i]; break;
                case "--group": group = args[++i]; break;
                case "--topic": TOPICS.add(args[++i]); break;
                case "--whitelist": whitelist = args[++i]; break;
                case "--streams": streams = Integer.parseInt(args[++i]); break;
                case "--strategy": strategy = args[++i]; break;
                case "--no-fetch": fetch = false; break;
                case "--records": records = true; break;
                case "--start": initial.add(args[++i]); break;
                case "--until-signal": untilSignal = true; break;
                case "--warm-up": warmUp = Integer.parseInt(args[++i]); break;
                case "--property": {
                    String kv = args[++i];
                    int eq = kv.indexOf('=');
                    if (eq <= 0) throw new IllegalArgumentException("--property wants key=value, got " + kv);
                    PROPS.put(kv.substring(0, eq), kv.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        if (zookeeper == null || group == null || (TOPICS.isEmpty() == (whitelist == null)))
            throw new IllegalArgumentException("--zookeeper, --group and one of --topic / --whitelist are required");
        Runtime.getRuntime().addShutdownHook(new Thread(HighLevelConsumers::stopAll, "stop-all"));
        for (int round = 1; round <= warmUp; round++) warm(round);
        emit("ready", null, "\"pid\":" + ProcessHandle.current().pid());
        for (String id : initial) {
            if (!command("start " + id) && untilSignal) {
                // A member process of its own (the lab's): createMessageStreams threw (the first rebalance gave up
                // after rebalance.max.retries) and, as the main() of an application of the era let the exception
                // out, the process ends here. Its consumer was never shut down: the registration and any owner
                // nodes stay until ZooKeeper expires the session. (Staying up with a registered connector that has
                // no streams left its partitions owned and unread to the end: issue 40, catalogue mode d.)
                Runtime.getRuntime().halt(1);
            }
        }
        if (untilSignal) {
            Thread.currentThread().join();  // SIGTERM runs the shutdown hook: every member shuts down
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().equals("exit")) break;
            command(line.trim());
        }
        System.exit(0);  // the shutdown hook stops every member
    }

    /** Carry out one command; false if it failed (said on stdout as an "error" event). */
    private static boolean command(String line) {
        if (line.isEmpty()) return true;
        String[] parts = line.split("\\s+", 2);
        String id = parts.length > 1 ? parts[1] : null;
        try {
            switch (parts[0]) {
                case "start": start(id); break;
                case "spawn": new Thread(() -> command("start " + id), "start-" + id).start(); break;
                case "stop": stop(id); break;
                case "crash": crash(id); break;
                case "commit": member(id).commitOffsets(); emit("committed", id, null); break;
                default: throw new IllegalArgumentException("unknown command " + parts[0]);
            }
        } catch (Throwable e) {
            emit("error", id, "\"command\":" + quote(line) + ",\"error\":" + quote(e.toString()));
            return false;
        }
        return true;
    }

    private static ConsumerConnector member(String id) {
        ConsumerConnector c;
        synchronized (MEMBERS) { c = MEMBERS.get(id); }
        if (c == null) throw new IllegalArgumentException("no running member " + id);
        return c;
    }

    private static void start(String id) {
        long t0 = System.nanoTime();
        ConsumerConnector c = connector(group, id);
        synchronized (MEMBERS) { MEMBERS.put(id, c); }
        List<KafkaStream<byte[], byte[]>> all = streams(c);
        for (int i = 0; i < all.size(); i++) {
            final KafkaStream<byte[], byte[]> stream = all.get(i);
            final int index = i;
            Thread t = new Thread(() -> drain(id, index, stream), id + "-stream-" + i);
            t.setDaemon(true);
            t.start();
        }
        emit("started", id, "\"ms\":" + (System.nanoTime() - t0) / 1_000_000 + ",\"streams\":" + all.size());
    }

    /** One round of --warm-up: a member alone in group G-warm-up joins, consumes a little and leaves. */
    private static void warm(int round) throws InterruptedException {
        String id = "warm-up-" + round;
        long t0 = System.nanoTime();
        ConsumerConnector c = connector(group + "-warm-up", id);
        List<KafkaStream<byte[], byte[]>> all = streams(c);
        long joined = System.nanoTime();
        for (KafkaStream<byte[], byte[]> stream : all) {
            Thread t = new Thread(() -> {
                try { for (ConsumerIterator<byte[], byte[]> it = stream.iterator(); it.hasNext(); ) it.next(); }
                catch (Throwable e) { /* ends with the connector */ }
            }, id + "-drain");
            t.setDaemon(true);
            t.start();
        }
        Thread.sleep(200);
        c.shutdown();
        emit("warmed", id, "\"round\":" + round + ",\"ms\":" + (joined - t0) / 1_000_000);
    }

    private static ConsumerConnector connector(String groupId, String id) {
        Properties p = new Properties();
        p.put("zookeeper.connect", zookeeper);
        p.put("group.id", groupId);
        p.put("consumer.id", id);
        p.put("partition.assignment.strategy", strategy);
        p.putAll(PROPS);
        return new ZookeeperConsumerConnector(new ConsumerConfig(p), fetch);
    }

    private static List<KafkaStream<byte[], byte[]>> streams(ConsumerConnector c) {
        List<KafkaStream<byte[], byte[]>> all = new ArrayList<>();
        if (whitelist != null) {
            all.addAll(c.createMessageStreamsByFilter(new Whitelist(whitelist), streams));
        } else {
            Map<String, Integer> counts = new HashMap<>();
            for (String t : TOPICS) counts.put(t, streams);
            for (List<KafkaStream<byte[], byte[]>> s : c.createMessageStreams(counts).values()) all.addAll(s);
        }
        return all;
    }

    private static void drain(String id, int index, KafkaStream<byte[], byte[]> stream) {
        try {
            ConsumerIterator<byte[], byte[]> it = stream.iterator();
            while (it.hasNext()) {
                MessageAndMetadata<byte[], byte[]> m = it.next();
                if (records)
                    emit("record", id, "\"stream\":" + index + ",\"topic\":" + quote(m.topic())
                            + ",\"partition\":" + m.partition() + ",\"offset\":" + m.offset());
            }
        } catch (Throwable e) {
            // a stream ends when its connector shuts down (or its session was closed under it)
        }
    }

    private static void stop(String id) {
        ConsumerConnector c;
        synchronized (MEMBERS) { c = MEMBERS.remove(id); }
        if (c == null) throw new IllegalArgumentException("no running member " + id);
        c.shutdown();
        emit("stopped", id, null);
    }

    private static void crash(String id) throws Exception {
        ConsumerConnector c;
        synchronized (MEMBERS) { c = MEMBERS.remove(id); }
        if (c == null) throw new IllegalArgumentException("no running member " + id);
        Field f = ZookeeperConsumerConnector.class.getDeclaredField("underlying");
        f.setAccessible(true);
        kafka.consumer.ZookeeperConsumerConnector scala = (kafka.consumer.ZookeeperConsumerConnector) f.get(c);
        scala.kafka$consumer$ZookeeperConsumerConnector$$zkClient().close();
        emit("crashed", id, null);
    }

    private static void stopAll() {
        List<String> ids;
        synchronized (MEMBERS) { ids = new ArrayList<>(MEMBERS.keySet()); }
        for (String id : ids) {
            try { stop(id); } catch (Throwable ignored) { /* exiting anyway */ }
        }
    }

    private static void emit(String event, String id, String rest) {
        StringBuilder b = new StringBuilder("{\"event\":").append(quote(event));
        if (id != null) b.append(",\"id\":").append(quote(id));
        b.append(",\"ts\":").append(System.currentTimeMillis());
        if (rest != null) b.append(',').append(rest);
        OUT.println(b.append('}'));
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') b.append('\\').append(ch);
            else if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
            else b.append(ch);
        }
        return b.append('"').toString();
    }
}
