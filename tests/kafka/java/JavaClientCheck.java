// Apache Kafka's Java client (kafka-clients) against a seglog store served over Kafka's protocol.
// Compiled and run by tests/kafka/test_java_client.py; prints one "OK ..." line per step and
// exits non-zero on the first failure.
//
// Usage: JavaClientCheck BOOTSTRAP TOPIC_PREFIX [CLIENT_PROPERTY=VALUE ...]

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
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
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class JavaClientCheck {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PARTITIONS = 3;
    static final int PER_CODEC = 200;

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        for (int i = 2; i < args.length; i++) {  // client properties (security.protocol, ...)
            int eq = args[i].indexOf('=');
            common.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }

        List<String> topics = new ArrayList<>();
        for (String codec : CODECS) {
            topics.add(prefix + "-" + codec);
        }
        String doomed = prefix + "-deleted";

        // -- AdminClient: create, describe, list, cluster --------------------------------------
        try (Admin admin = Admin.create(common)) {
            List<NewTopic> create = new ArrayList<>();
            for (String t : topics) {
                create.add(new NewTopic(t, PARTITIONS, (short) 1));
            }
            create.add(new NewTopic(doomed, 2, (short) 1)
                    .configs(Map.of("cleanup.policy", "compact", "retention.ms", "3600000")));
            admin.createTopics(create).all().get();
            Map<String, TopicDescription> described = admin.describeTopics(topics).allTopicNames().get();
            for (String t : topics) {
                TopicDescription d = described.get(t);
                check(d != null && d.partitions().size() == PARTITIONS, "describeTopics " + t + ": " + d);
                check(d.partitions().get(0).leader() != null, "leader of " + t);
            }
            Set<String> listed = admin.listTopics().names().get();
            check(listed.containsAll(topics) && listed.contains(doomed), "listTopics: " + listed);
            DescribeClusterResult cluster = admin.describeCluster();
            check(cluster.nodes().get().size() == 1, "describeCluster nodes");
            check(cluster.controller().get() != null, "describeCluster controller");
            check(cluster.clusterId().get() != null, "describeCluster cluster id");
            try {
                admin.createTopics(List.of(new NewTopic(topics.get(0), 1, (short) 1))).all().get();
                check(false, "creating an existing topic succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException,
                        "existing topic: " + e.getCause());
            }
            System.out.println("OK admin create/describe/list " + (topics.size() + 1) + " topics, cluster "
                    + cluster.clusterId().get());
        }

        // -- Producer: acks=all, idempotent, each codec, keys and headers ------------------------
        Map<String, List<String>> sent = new HashMap<>();
        for (String codec : CODECS) {
            Properties p = new Properties();
            p.putAll(common);
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            String topic = prefix + "-" + codec;
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int i = 0; i < PER_CODEC; i++) {
                    String value = codec + "-value-" + i;
                    ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, utf8("key-" + (i % 7)), utf8(value));
                    rec.headers().add("codec", utf8(codec)).add("i", utf8(Integer.toString(i)));
                    acks.add(producer.send(rec));
                    sent.computeIfAbsent(topic, k -> new ArrayList<>()).add(value);
                }
                producer.flush();
                for (Future<RecordMetadata> f : acks) {
                    RecordMetadata md = f.get();
                    check(md.offset() >= 0 && md.partition() >= 0 && md.partition() < PARTITIONS, "metadata " + md);
                }
            }
            System.out.println("OK produced " + PER_CODEC + " records with " + codec);
        }

        // -- Consumer: a group, subscribe, read everything, commit ---------------------------------
        Properties c = new Properties();
        c.putAll(common);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, prefix + "-group");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        int total = PER_CODEC * CODECS.length;
        Map<String, Set<String>> got = new HashMap<>();
        Map<TopicPartition, Long> next = new HashMap<>();
        int n = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(topics);
            long deadline = System.currentTimeMillis() + 60_000;
            while (n < total && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = new String(r.value(), StandardCharsets.UTF_8);
                    String codec = r.topic().substring(prefix.length() + 1);
                    Header h = r.headers().lastHeader("codec");
                    check(h != null && new String(h.value(), StandardCharsets.UTF_8).equals(codec), "codec header of " + value);
                    String i = new String(r.headers().lastHeader("i").value(), StandardCharsets.UTF_8);
                    check(value.equals(codec + "-value-" + i), "value " + value + " header i=" + i);
                    check(new String(r.key(), StandardCharsets.UTF_8).equals("key-" + (Integer.parseInt(i) % 7)), "key of " + value);
                    got.computeIfAbsent(r.topic(), k -> new HashSet<>()).add(value);
                    next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                    n++;
                }
            }
            check(n == total, "consumed " + n + " of " + total);
            for (String t : topics) {
                check(got.get(t).equals(new HashSet<>(sent.get(t))), "records of " + t);
            }
            Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
            next.forEach((tp, off) -> commit.put(tp, new OffsetAndMetadata(off)));
            consumer.commitSync(commit);
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(commit.keySet());
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : commit.entrySet()) {
                check(committed.get(e.getKey()).offset() == e.getValue().offset(), "committed " + e.getKey());
            }
            System.out.println("OK consumed " + n + " records in group " + prefix + "-group, committed "
                    + commit.size() + " partitions");
        }

        // -- AdminClient: delete a topic ---------------------------------------------------------
        try (Admin admin = Admin.create(common)) {
            admin.deleteTopics(List.of(doomed)).all().get();
            try {
                admin.describeTopics(List.of(doomed)).allTopicNames().get();
                check(false, "the deleted topic is still described");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof UnknownTopicOrPartitionException, "deleted topic: " + e.getCause());
            }
            check(!admin.listTopics().names().get().contains(doomed), "deleted topic still listed");
            System.out.println("OK admin deleted " + doomed);
        }
    }
}
