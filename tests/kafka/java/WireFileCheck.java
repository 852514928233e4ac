import java.io.File;
import java.util.TreeSet;

import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

/**
 * Reads segment files with Kafka's own record classes: every batch of each {@code .log} through
 * {@link FileRecords#batches()}, {@code ensureValid()} (size and CRC), then every record of it
 * (decompressed by Kafka's codecs). Checks that offsets run on from the segment's base offset
 * without gaps, that a batch's record count, last offset and (CreateTime) max timestamp agree
 * with its records, and that the batches fill the file. Prints, per file,
 * {@code OK <path> batches=<n> records=<n> next=<offset> codecs=[...]}, or {@code FAIL <path>: why};
 * exits 1 if any file failed.
 */
public final class WireFileCheck {
    private WireFileCheck() {
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    public static void main(String[] args) {
        int failures = 0;
        for (String path : args) {
            File file = new File(path);
            long base = Long.parseLong(file.getName().substring(0, 20));
            try (FileRecords records = FileRecords.open(file, false)) {
                long expected = base;
                long batches = 0;
                long count = 0;
                long bytes = 0;
                TreeSet<String> codecs = new TreeSet<>();
                for (FileChannelRecordBatch batch : records.batches()) {
                    batch.ensureValid();
                    check(batch.magic() == RecordBatch.MAGIC_VALUE_V2, "magic " + batch.magic() + " at offset " + batch.baseOffset());
                    check(batch.baseOffset() == expected, "batch at offset " + batch.baseOffset() + ", expected " + expected);
                    long offset = batch.baseOffset();
                    long maxTimestamp = RecordBatch.NO_TIMESTAMP;
                    int n = 0;
                    for (Record record : batch) {
                        record.ensureValid();
                        check(record.offset() == offset, "record offset " + record.offset() + ", expected " + offset);
                        maxTimestamp = Math.max(maxTimestamp, record.timestamp());
                        offset++;
                        n++;
                    }
                    check(batch.countOrNull() != null && batch.countOrNull() == n,
                          "batch at " + batch.baseOffset() + " says " + batch.countOrNull() + " records, has " + n);
                    check(batch.lastOffset() == offset - 1, "batch at " + batch.baseOffset() + " last offset " + batch.lastOffset());
                    if (batch.timestampType() == TimestampType.CREATE_TIME) {
                        check(batch.maxTimestamp() == maxTimestamp,
                              "batch at " + batch.baseOffset() + " max timestamp " + batch.maxTimestamp() + ", records' " + maxTimestamp);
                    }
                    codecs.add(batch.compressionType().name);
                    expected = batch.nextOffset();
                    batches++;
                    count += n;
                    bytes += batch.sizeInBytes();
                }
                check(bytes == records.sizeInBytes(), "batches cover " + bytes + " of " + records.sizeInBytes() + " bytes");
                System.out.println("OK " + path + " batches=" + batches + " records=" + count + " next=" + expected
                                   + " codecs=" + String.join(",", codecs));
            } catch (Exception e) {
                failures++;
                System.out.println("FAIL " + path + ": " + e);
            }
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
