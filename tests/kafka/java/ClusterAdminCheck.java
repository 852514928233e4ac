// Apache Kafka's Java client against a seglog cluster's Kafka listeners: the AdminClient creates
// a replicated topic, an idempotent acks=all producer writes to it, deleteRecords moves the low
// watermark (and is refused past the high watermark), and a consumer from the beginning starts
// at the new log start. Compiled and run by tests/cluster/test_kafka_clients.py; prints one
// "OK ..." line per step and exits non-zero on the first failure.
//
// Usage: ClusterAdminCheck BOOTSTRAP TOPIC REPLICATION_FACTOR

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ClusterAdminCheck {
    static final int RECORDS = 10;
    static final long DELETE_BEFORE = 4;

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        short replicas = Short.parseShort(args[2]);
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        TopicPartition tp = new TopicPartition(topic, 0);

        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, replicas)
                    .configs(Map.of("min.insync.replicas", "2")))).all().get();
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            check(d.partitions().get(0).replicas().size() == replicas, "replicas of " + topic + ": " + d);
            check(d.partitions().get(0).leader() != null, "leader of " + topic + ": " + d);
            System.out.println("OK created " + topic + " with " + replicas + " replicas, leader "
                    + d.partitions().get(0).leader().id());
        }

        Properties p = new Properties();
        p.putAll(common);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < RECORDS; i++) {
                byte[] value = ("r" + i).getBytes(StandardCharsets.UTF_8);
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
                check(md.offset() == i, "offset of record " + i + ": " + md.offset());
            }
        }
        System.out.println("OK produced " + RECORDS + " records with acks=all");

        try (Admin admin = Admin.create(common)) {
            DeletedRecords deleted = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(DELETE_BEFORE)))
                    .lowWatermarks().get(tp).get();
            check(deleted.lowWatermark() == DELETE_BEFORE, "low watermark " + deleted.lowWatermark());
            System.out.println("OK deleteRecords low watermark " + deleted.lowWatermark());
            try {
                admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(RECORDS + 5))).all().get();
                check(false, "deleting past the high watermark succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof OffsetOutOfRangeException, "past the high watermark: " + e.getCause());
            }
            System.out.println("OK deleteRecords past the high watermark refused");
        }

        Properties c = new Properties();
        c.putAll(common);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            check(consumer.position(tp) == DELETE_BEFORE, "position after seekToBeginning " + consumer.position(tp));
            List<Long> offsets = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 20_000;
            while (offsets.size() < RECORDS - DELETE_BEFORE && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    check(new String(r.value(), StandardCharsets.UTF_8).equals("r" + r.offset()), "value at " + r.offset());
                    offsets.add(r.offset());
                }
            }
            check(offsets.size() == RECORDS - DELETE_BEFORE && offsets.get(0) == DELETE_BEFORE,
                    "consumed from the beginning: " + offsets);
            System.out.println("OK consumed offsets " + offsets.get(0) + ".." + offsets.get(offsets.size() - 1));
        }
    }
}
