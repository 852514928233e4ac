import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Java producer streaming to a cluster under faults, for
 * tests/cluster/test_kafka_faults.py: {@code java AckedProducer BOOTSTRAP TOPIC PARTITIONS PREFIX}
 * sends {@code PREFIX-000000}, {@code PREFIX-000001}, ... round-robin over the partitions
 * (idempotent, acks=all) until its standard input closes, then flushes and exits. Each
 * acknowledged record is printed as {@code ACK partition offset value}, each failed one as
 * {@code FAIL value error}, and {@code SENT n} last.
 */
public final class AckedProducer {
    private AckedProducer() {
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        String prefix = args[3];
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // until the test closes our standard input
                }
            } catch (IOException e) {
                // closed: stop as well
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        long n = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            while (stdin.isAlive()) {
                String value = String.format("%s-%06d", prefix, n);
                producer.send(
                        new ProducerRecord<>(topic, (int) (n % partitions), null, value.getBytes(StandardCharsets.UTF_8)),
                        (md, err) -> {
                            if (err != null) {
                                emit("FAIL " + value + " " + err);
                            } else {
                                emit("ACK " + md.partition() + " " + md.offset() + " " + value);
                            }
                        });
                n++;
                if (n % 20 == 0) {
                    Thread.sleep(5);
                }
            }
            producer.flush();
        }
        emit("SENT " + n);
    }
}
