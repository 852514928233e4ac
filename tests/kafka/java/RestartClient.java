import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Java client across a broker restart, for tests/kafka/test_resilience.py.
 *
 * <p>{@code java RestartClient produce BOOTSTRAP TOPIC N}: an idempotent producer (acks=all)
 * sends {@code v0} .. {@code v<N-1>} to partition 0, one every millisecond, prints
 * {@code restart} after the first half was handed over (the test then restarts the broker while
 * the rest is sent), flushes and prints {@code acked A failed F FIRST_ERROR}.
 *
 * <p>{@code java RestartClient consume BOOTSTRAP TOPIC N}: a consumer assigned partition 0
 * from the beginning prints each value it reads, one a line, until it has N (or 60 s passed).
 */
public final class RestartClient {
    private RestartClient() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        int n = Integer.parseInt(args[3]);
        if (mode.equals("produce")) {
            produce(bootstrap, topic, n);
        } else {
            consume(bootstrap, topic, n);
        }
    }

    private static void produce(String bootstrap, String topic, int n) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "200");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>("none");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                byte[] value = ("v" + i).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, 0, null, value), (meta, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                    } else {
                        failed.incrementAndGet();
                        firstError.compareAndSet("none", e.toString().replace(' ', '_'));
                    }
                });
                if (i == n / 2) {
                    System.out.println("restart");
                    System.out.flush();
                }
                Thread.sleep(1);
            }
            producer.flush();
        }
        System.out.println("acked " + acked.get() + " failed " + failed.get() + " " + firstError.get());
        System.out.flush();
    }

    private static void consume(String bootstrap, String topic, int n) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "200");
        p.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        long deadline = System.currentTimeMillis() + 60_000;
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            while (seen < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    System.out.println(new String(r.value(), StandardCharsets.UTF_8));
                    seen++;
                }
                System.out.flush();
            }
        }
    }
}
