package kaka.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java kafka-clients (producer, consumer with a group, admin client, transactions) against a
 * running kaka. Usage: JavaClientsCheck BOOTSTRAP [RECORDS]. Prints one "ok" line per step and
 * exits 0, or prints "FAIL: what differed" and exits 1. A watchdog ends a hung run after 120 s.
 */
public final class JavaClientsCheck {
    private static String bootstrap;
    private static final String TOPIC = "jc-t";
    private static final String TXN_TOPIC = "jc-txn";
    private static final String GROUP = "jc-g";

    private static final class Mismatch extends RuntimeException {
        Mismatch(String m) {
            super(m);
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new Mismatch(what);
        }
    }

    private static void step(String what) {
        System.out.println("ok  " + what);
        System.out.flush();
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: JavaClientsCheck BOOTSTRAP [RECORDS]");
            System.exit(2);
        }
        bootstrap = args[0];
        int n = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(120_000);
                System.out.println("FAIL: timed out after 120 s");
                System.out.flush();
                Runtime.getRuntime().halt(1);
            } catch (InterruptedException e) {
                // finished in time
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            run(n);
        } catch (Throwable t) {
            System.out.println("FAIL: " + t);
            t.printStackTrace(System.out);
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
        System.out.println("java kafka-clients " + org.apache.kafka.common.utils.internals.AppInfoParser.getVersion()
                + " against " + bootstrap + ": all checks passed");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    private static Properties base() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    private static void run(int n) throws Exception {
        try (Admin admin = Admin.create(adminProps())) {
            createTopics(admin);
            Map<TopicPartition, Long> ends = produce(n);
            consumeWithGroup(n, ends);
            transactions();
            describe(admin, ends);
        }
    }

    private static Properties adminProps() {
        Properties p = base();
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return p;
    }

    // ------------------------------------------------------------------ admin: create topics
    private static void createTopics(Admin admin) throws Exception {
        admin.createTopics(List.of(new NewTopic(TOPIC, 2, (short) 1), new NewTopic(TXN_TOPIC, 1, (short) 1)))
                .all().get(30, TimeUnit.SECONDS);
        Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
        check(names.contains(TOPIC) && names.contains(TXN_TOPIC), "listTopics lacks the new topics: " + names);
        try {
            admin.createTopics(List.of(new NewTopic(TOPIC, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            throw new Mismatch("creating " + TOPIC + " twice succeeded");
        } catch (java.util.concurrent.ExecutionException e) {
            check(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException,
                    "second create: expected TopicExistsException, got " + e.getCause());
        }
        step("admin: created " + TOPIC + " (2 partitions) and " + TXN_TOPIC + "; a second create is TopicExists");
    }

    // ------------------------------------------------------------------ idempotent producer
    private static Map<TopicPartition, Long> produce(int n) throws Exception {
        Properties p = base();
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        List<Future<RecordMetadata>> futs = new ArrayList<>();
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                futs.add(prod.send(new ProducerRecord<>(TOPIC, i % 2, "k" + i, "v" + i)));
            }
            prod.flush();
            Map<TopicPartition, List<Long>> offs = new TreeMap<>((a, b) -> a.partition() - b.partition());
            for (Future<RecordMetadata> f : futs) {
                RecordMetadata md = f.get(30, TimeUnit.SECONDS);
                offs.computeIfAbsent(new TopicPartition(md.topic(), md.partition()), k -> new ArrayList<>())
                        .add(md.offset());
            }
            Map<TopicPartition, Long> ends = new HashMap<>();
            for (var e : offs.entrySet()) {
                List<Long> o = e.getValue();
                for (int i = 0; i < o.size(); i++) {
                    check(o.get(i) == i, "partition " + e.getKey() + ": record " + i + " acked at offset " + o.get(i));
                }
                ends.put(e.getKey(), (long) o.size());
            }
            check(ends.size() == 2, "acks came from partitions " + ends.keySet());
            step("producer: " + n + " records, idempotent, acks=all, lz4; offsets 0.. in order per partition "
                    + ends);
            return ends;
        }
    }

    // ------------------------------------------------------------------ consumer group
    private static KafkaConsumer<String, String> groupConsumer() {
        Properties p = base();
        p.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 100);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        c.subscribe(List.of(TOPIC));
        return c;
    }

    private static void consumeWithGroup(int n, Map<TopicPartition, Long> ends) {
        Set<String> seen = new HashSet<>();
        Map<TopicPartition, OffsetAndMetadata> committed = new HashMap<>();
        // First member: process the first half of each partition (records past it are dropped
        // unprocessed), commit exactly what was processed, leave.
        Map<TopicPartition, Long> half = new HashMap<>();
        ends.forEach((tp, end) -> half.put(tp, end / 2));
        try (KafkaConsumer<String, String> c = groupConsumer()) {
            long deadline = System.currentTimeMillis() + 30_000;
            while (!committed.keySet().equals(half.keySet()) || half.entrySet().stream()
                    .anyMatch(e -> committed.get(e.getKey()).offset() < e.getValue())) {
                check(System.currentTimeMillis() < deadline, "first consumer: only " + seen.size() + " records in 30 s");
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    if (r.offset() >= half.get(new TopicPartition(r.topic(), r.partition()))) {
                        continue;
                    }
                    check(r.value().equals("v" + r.key().substring(1)), "record " + r + " has a foreign value");
                    check(seen.add(r.value()), "duplicate " + r.value() + " at " + r.partition() + ":" + r.offset());
                    committed.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
            }
            c.commitSync(committed, Duration.ofSeconds(30));
            Map<TopicPartition, OffsetAndMetadata> back = c.committed(committed.keySet(), Duration.ofSeconds(30));
            for (var e : committed.entrySet()) {
                check(back.get(e.getKey()) != null && back.get(e.getKey()).offset() == e.getValue().offset(),
                        "committed " + e + " but read back " + back.get(e.getKey()));
            }
        }
        int first = seen.size();
        // Second member of the same group: resumes exactly at the committed offsets, reads the rest.
        Map<TopicPartition, Long> firstOffset = new HashMap<>();
        try (KafkaConsumer<String, String> c = groupConsumer()) {
            long deadline = System.currentTimeMillis() + 30_000;
            while (seen.size() < n) {
                check(System.currentTimeMillis() < deadline, "second consumer: " + seen.size() + " of " + n + " in 30 s");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    firstOffset.putIfAbsent(new TopicPartition(r.topic(), r.partition()), r.offset());
                    check(seen.add(r.value()), "re-read " + r.value() + " at " + r.partition() + ":" + r.offset()
                            + " (committed " + committed + ")");
                }
            }
            check(firstOffset.keySet().equals(committed.keySet()), "second consumer read from " + firstOffset.keySet());
            for (var e : firstOffset.entrySet()) {
                OffsetAndMetadata com = committed.get(e.getKey());
                long want = com.offset();
                check(e.getValue() == want, "second consumer began " + e.getKey() + " at " + e.getValue()
                        + ", committed was " + want);
            }
            Map<TopicPartition, OffsetAndMetadata> all = new HashMap<>();
            for (var e : ends.entrySet()) {
                all.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
            }
            c.commitSync(all, Duration.ofSeconds(30));
        }
        check(seen.size() == n, "read " + seen.size() + " distinct of " + n);
        step("consumer group " + GROUP + ": first member read " + first + " and committed " + committed.values().stream()
                .map(OffsetAndMetadata::offset).collect(Collectors.toList()) + ", second resumed there and read the other "
                + (n - first) + ", no duplicates");
    }

    // ------------------------------------------------------------------ transactions
    private static List<String> readAll(String isolation) {
        Properties p = base();
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(TXN_TOPIC, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            // For read_committed the end offset is the last stable offset.
            long end = c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
            long deadline = System.currentTimeMillis() + 30_000;
            while (c.position(tp, Duration.ofSeconds(30)) < end) {
                check(System.currentTimeMillis() < deadline, isolation + ": position " + c.position(tp) + " < end " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
            }
        }
        return got;
    }

    private static void transactions() throws Exception {
        Properties p = base();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "jc-txn-id");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            prod.initTransactions();
            prod.beginTransaction();
            for (int i = 0; i < 3; i++) {
                prod.send(new ProducerRecord<>(TXN_TOPIC, 0, null, "committed-" + i));
            }
            prod.commitTransaction();
            prod.beginTransaction();
            for (int i = 0; i < 2; i++) {
                prod.send(new ProducerRecord<>(TXN_TOPIC, 0, null, "aborted-" + i));
            }
            prod.flush();
            prod.abortTransaction();
            prod.beginTransaction();
            prod.send(new ProducerRecord<>(TXN_TOPIC, 0, null, "committed-3"));
            prod.commitTransaction();
        }
        List<String> rc = readAll("read_committed");
        check(rc.equals(List.of("committed-0", "committed-1", "committed-2", "committed-3")),
                "read_committed saw " + rc);
        List<String> ru = readAll("read_uncommitted");
        check(ru.equals(List.of("committed-0", "committed-1", "committed-2", "aborted-0", "aborted-1", "committed-3")),
                "read_uncommitted saw " + ru);
        step("transactions: commit, abort, commit; read_committed saw " + rc + ", read_uncommitted also the 2 aborted");
    }

    // ------------------------------------------------------------------ admin: describe
    @SuppressWarnings("deprecation")
    private static void describe(Admin admin, Map<TopicPartition, Long> ends) throws Exception {
        Map<String, TopicDescription> td = admin.describeTopics(List.of(TOPIC, TXN_TOPIC)).allTopicNames()
                .get(30, TimeUnit.SECONDS);
        check(td.get(TOPIC).partitions().size() == 2, TOPIC + " described with " + td.get(TOPIC).partitions());
        check(td.get(TXN_TOPIC).partitions().size() == 1, TXN_TOPIC + " described with " + td.get(TXN_TOPIC).partitions());
        int leader = td.get(TOPIC).partitions().get(0).leader().id();
        check(admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).size() == 1, "cluster is not one node");

        Collection<ConsumerGroupListing> groups = admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS);
        Set<String> ids = groups.stream().map(ConsumerGroupListing::groupId).collect(Collectors.toSet());
        check(ids.contains(GROUP), "listConsumerGroups lacks " + GROUP + ": " + ids);
        ConsumerGroupDescription gd = admin.describeConsumerGroups(List.of(GROUP)).all().get(30, TimeUnit.SECONDS)
                .get(GROUP);
        check(gd.groupState() == GroupState.EMPTY, GROUP + " state " + gd.groupState() + ", expected EMPTY");
        check(gd.members().isEmpty(), GROUP + " still has members " + gd.members());
        Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata()
                .get(30, TimeUnit.SECONDS);
        for (var e : ends.entrySet()) {
            check(offs.get(e.getKey()) != null && offs.get(e.getKey()).offset() == e.getValue(),
                    GROUP + " offset for " + e.getKey() + " is " + offs.get(e.getKey()) + ", expected " + e.getValue());
        }
        step("admin: describeTopics (2 and 1 partitions, leader " + leader + "), describeCluster (1 node), "
                + "listConsumerGroups has " + GROUP + ", describeConsumerGroups " + gd.groupState()
                + ", listConsumerGroupOffsets " + offs.values().stream().map(OffsetAndMetadata::offset)
                .collect(Collectors.toList()));
    }
}
