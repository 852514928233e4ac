import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A consumer group member of Kafka's Java client in a process of its own, for
 * tests/kafka/test_resilience.py, speaking the protocol of tests/kafka/_group_member.py:
 * {@code java GroupMember BOOTSTRAP TOPIC GROUP SESSION_MS} subscribes, prints one JSON line per
 * record consumed ({@code [partition, offset]}) and {@code {"assigned": [...]}} whenever its
 * assignment changes, commits synchronously after each poll that returned records, and on
 * SIGTERM closes cleanly (leaving the group) and exits.
 */
public final class GroupMember {
    private static volatile boolean stop;

    private GroupMember() {
    }

    private static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        int session = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(session));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(Math.max(session / 5, 50)));
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop = true;
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        List<Integer> assigned = new ArrayList<>();
        try {
            consumer.subscribe(Collections.singletonList(topic));
            while (!stop) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    emit("[" + r.partition() + ", " + r.offset() + "]");
                }
                if (!records.isEmpty()) {
                    try {
                        consumer.commitSync();
                    } catch (WakeupException e) {
                        throw e;
                    } catch (RuntimeException e) {
                        // A rebalance: the records come again.
                        emit("{\"commit_failed\": \"" + e.getClass().getSimpleName() + "\"}");
                    }
                }
                List<Integer> now = new ArrayList<>();
                for (TopicPartition tp : consumer.assignment()) {
                    now.add(tp.partition());
                }
                Collections.sort(now);
                if (!now.equals(assigned)) {
                    assigned = now;
                    emit("{\"assigned\": " + now + "}");
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: close below.
        } finally {
            consumer.close();
            closed.countDown();
        }
    }
}
