"""``seglog demo``: three replicas in one process lose their leader and lose nothing, then Spark
counts every replica's files; with ``--single``, one store end to end with progress."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from seglog.cli.common import CliError, RecordProgress
from seglog.cli.topics import print_describe
from seglog.storage.topic import TopicPartition
from seglog.store import Store

__all__ = ["run_demo"]


def _single_demo(args: argparse.Namespace) -> int:
    """One store: produce with progress, consume back as Arrow columns, verify, show the files."""
    out = sys.stdout
    if args.records < 1:
        raise CliError(f"--records must be at least 1, got {args.records}")
    if args.partitions < 1:
        raise CliError(f"--partitions must be at least 1, got {args.partitions}")
    base = args.base
    os.makedirs(base, exist_ok=True)
    path = os.path.join(base, "store")
    n, parts = args.records, args.partitions
    topic = "demo-events"
    out.write(f"seglog demo: a store in {path}\n")
    with Store.open(path) as store:
        if topic in store.topics():
            store.delete_topic(topic)
        store.create_topic(topic, parts, {"segment.bytes": args.segment_bytes})
        out.write(
            f"  created topic {topic!r}: {parts} partitions, segment.bytes={args.segment_bytes:,}; "
            f"producing with compression.type={args.compression}\n"
        )
        producer = store.producer(compression_type=args.compression)
        chunk = 50_000
        bar = RecordProgress("produce", n, out)
        sent = 0
        while sent < n:
            m = min(chunk, n - sent)
            values = [b"event %010d " % i + b"." * 80 for i in range(sent, sent + m)]
            keys = [b"user-%d" % (i % 1000) for i in range(sent, sent + m)]
            producer.send_batch(topic, values, keys=keys)
            sent += m
            bar.update(sent)
        t_prod = bar.finish(sent)
        out.write(
            f"  produced {n:,} records (keys user-0..user-999, murmur2-partitioned) in "
            f"{t_prod:.2f} s: {n / t_prod / 1e6:.2f} M records/s\n"
        )

        consumer = store.consumer(group_id="demo-verifier", auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, p) for p in range(parts)])
        # lazy: pyarrow is optional and slow to import (keeps start-up fast)
        import pyarrow as pa
        import pyarrow.compute as pc

        bar = RecordProgress("consume", n, out)
        got = 0
        numbers = []
        while got < n:
            table = consumer.poll_columns(timeout_ms=0)
            if not table.num_rows:
                break
            # The event number inside each value, without a Python object per record.
            digits = pc.binary_slice(table.column("value"), 6, 16)
            numbers.append(pc.cast(pc.cast(digits, pa.string()), pa.int64()))
            got += table.num_rows
            bar.update(got)
        t_cons = bar.finish(got)
        consumer.commit()
        seen = pa.chunked_array(numbers, pa.int64()) if numbers else pa.chunked_array([], pa.int64())
        distinct = pc.count_distinct(seen).as_py() if got else 0
        in_range = got == 0 or (pc.min(seen).as_py() >= 0 and pc.max(seen).as_py() < n)
        missing = n - distinct if in_range else n
        out.write(
            f"  consumed {got:,} records back as Arrow columns in {t_cons:.2f} s: "
            f"{got / max(t_cons, 1e-9) / 1e6:.2f} M records/s\n"
        )
        if got != n or missing:
            raise CliError(f"verification failed: {got:,} records read, {missing:,} of {n:,} missing")
        out.write(
            f"  verified: every one of the {n:,} records came back exactly once; offsets "
            f"committed for group demo-verifier\n"
        )
        desc = store.describe(topic)
    with Store.open(path, read_only=True) as ro:
        out.write("\n")
        print_describe(ro.describe(internal=False), out)
    out.write(f"\n  files in {path}/{topic}-0:\n")
    for name in sorted(os.listdir(os.path.join(path, f"{topic}-0")))[:8]:
        size = os.path.getsize(os.path.join(path, f"{topic}-0", name))
        out.write(f"    {name:40s} {size:>12,} bytes\n")
    if _demo_keeps(args):
        out.write(
            f"\n  the directory is a Kafka log dir: try `seglog describe {path}` or "
            f"`seglog dump {desc[0].partitions[0].path}/{'0' * 20}.log`\n"
        )
        if not args.dir:
            out.write(f"  (kept in {base})\n")
    else:
        out.write(
            f"\n  the temporary directory {base} is removed now (--keep keeps it, to look at with "
            "`seglog describe` and `seglog dump`)\n"
        )
    return 0


def _spark_missing() -> str | None:
    """Why Spark cannot run here (one line, with how to get it), or None if it can."""
    if importlib.util.find_spec("pyspark") is None:
        return 'pyspark is not installed (pip install "seglog[spark]")'
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime found (install one, e.g. OpenJDK 17, or set JAVA_HOME)"
    return None


def _spark_count(node_dirs: Sequence[str], say: Callable[[str], None]) -> dict[str, int] | None:
    """Each node's log dir read by Spark (``format("seglog")``): records per dir."""
    missing = _spark_missing()
    if missing is not None:
        say(f"  Spark: skipped, {missing}")
        return None
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # lazy: PySpark (which the Spark binding imports too) is optional and slow to import
    from seglog.bindings.spark import local_session

    say("  Spark: starting a local session (local[2]) ...")
    spark = local_session("seglog-demo")
    try:
        counts = {}
        for d in node_dirs:
            df = spark.read.format("seglog").option("columns", "offset").load(d)
            counts[d] = df.count()
            say(f'    spark.read.format("seglog").load({os.path.basename(d)!r}).count() = {counts[d]:,}')
        return counts
    finally:
        spark.stop()


def _poll_until(predicate: Callable[[], bool], timeout_s: float, failure: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise CliError(f"{failure} within {timeout_s:.0f} s")
        time.sleep(0.05)


def _cluster_demo(args: argparse.Namespace) -> int:
    """The three-replica story: produce, kill the leader, watch the ISR shrink and the
    election, keep producing, restart the node and watch it rejoin, consume everything, then
    Spark counts every node's segment dirs."""
    # lazy: only the cluster demo needs the cluster (keeps start-up fast)
    from seglog.cluster.local import LocalCluster

    out = sys.stdout

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    n = 200_000 if args.records is None else args.records
    if n < 1:
        raise CliError(f"--records must be at least 1, got {n}")
    base = args.base
    path = os.path.join(base, "cluster")
    if os.path.exists(path):
        shutil.rmtree(path)
    topic = "orders"
    acked: list[int] = []  # offsets, by record number
    t_start = time.perf_counter()
    with LocalCluster(nodes=3, dir=path) as cluster:
        say(f"seglog demo: three replica nodes in one process (loopback TCP, in-memory coordinator), data in {path}")
        cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        _poll_until(lambda: cluster.leader(topic) is not None, 30, "no leader was elected for the new topic")
        leader = cluster.leader(topic)
        assert leader is not None
        say(
            f"  topic {topic!r}: replication factor 3, min.insync.replicas=2; leader node {leader}, "
            f"ISR {cluster.isr(topic)}"
        )
        producer = cluster.producer(acks="all", enable_idempotence=True)

        def produce(label: str, start: int, count: int) -> None:
            bar = RecordProgress(label, count, out)
            chunk = 20_000
            done = 0
            while done < count:
                m = min(chunk, count - done)
                values = [b"order-%09d " % i + b"." * 84 for i in range(start + done, start + done + m)]
                for r in producer.send_batch(topic, values, partition=0):
                    acked.extend(range(r.first_offset, r.last_offset + 1))
                done += m
                bar.update(done)
            t = bar.finish(done)
            say(
                f"  {label}: {count:,} records acknowledged by the ISR (acks=all) in {t:.2f} s, "
                f"{count / max(t, 1e-9) / 1e6:.2f} M records/s"
            )

        produce("produce", 0, n)
        say(f"  killing the leader, node {leader} (abrupt: sockets closed, nothing flushed)")
        cluster.kill(leader)
        t0 = time.perf_counter()
        shown = ""
        while True:
            st = cluster.state(topic)
            line = f"leader {st.leader if st else '?'}, ISR {list(st.isr) if st else []}"
            if line != shown:
                say(f"    {time.perf_counter() - t0:5.2f} s  {line}")
                shown = line
            if st is not None and st.leader not in (-1, leader) and leader not in st.isr:
                break
            if time.perf_counter() - t0 > 30:
                raise CliError("no new leader was elected within 30 s")
            time.sleep(0.05)
        st = cluster.state(topic)
        assert st is not None
        say(
            f"  the ISR shrank to {list(st.isr)} and node {st.leader} was elected leader "
            f"(leader epoch {st.leader_epoch}); producing on"
        )
        produce("produce", n, n)
        say(f"  restarting node {leader} from its directory")
        cluster.restart(leader)
        t0 = time.perf_counter()
        _poll_until(lambda: leader in cluster.isr(topic), 60, f"node {leader} did not rejoin the ISR")
        say(
            f"  node {leader} recovered its log, caught up from the leader and rejoined the ISR in "
            f"{time.perf_counter() - t0:.2f} s: ISR {cluster.isr(topic)}"
        )
        producer.close()

        total = len(acked)
        consumer = cluster.consumer()
        consumer.assign([(topic, 0)])
        bar = RecordProgress("consume", total, out)
        seen = [-1] * total
        got = dups = stray = 0
        while got < total:
            batch = consumer.poll(2000, max_records=100_000)
            if not batch:
                break
            for r in batch:
                i = int(r.value[6:15]) if r.value else -1
                if not 0 <= i < total:
                    stray += 1
                elif seen[i] >= 0:
                    dups += 1
                else:
                    seen[i] = r.offset
            got += len(batch)
            bar.update(got)
        t_cons = bar.finish(got)
        consumer.close()
        lost = sum(1 for i in range(total) if seen[i] != acked[i])
        say(
            f"  consumed {got:,} records in {t_cons:.2f} s: {total:,} acknowledged, {lost} lost or "
            f"moved, {dups} duplicated, {stray} unexpected"
        )
        if lost or dups or stray or got != total:
            raise CliError(
                f"verification failed: {lost} acknowledged records lost, {dups} duplicated, {stray} unexpected"
            )
        say(
            f"  verified: every acknowledged record is there exactly once, at the offset it was "
            f"acknowledged with ({time.perf_counter() - t_start:.1f} s so far)"
        )
        # Followers learn the final high watermark with their next fetch; wait for it, so that
        # each node's checkpoint (what Spark reads up to) covers everything.
        _poll_until(
            lambda: sorted(cluster.high_watermarks(topic).values()) == [total] * 3,
            30,
            "the replicas' high watermarks did not all reach the log end",
        )
        node_dirs = [cluster.node_dir(i) for i in cluster.ids]
    # Closed cleanly: every node flushed its logs and checkpointed its high watermark.
    say("  the cluster is shut down; each node's directory is a Kafka log dir:")
    counts = _spark_count(node_dirs, say) if not args.no_spark else None
    if args.no_spark:
        say("  Spark: skipped (--no-spark)")
    if counts is not None:
        bad = {d: c for d, c in counts.items() if c != total}
        if bad:
            raise CliError(f"Spark counted {bad} records, expected {total:,} in every replica")
        say(f"  Spark read {total:,} records from each of the three replicas")
    if _demo_keeps(args):
        say(f"  files kept in {path}: try `seglog describe {node_dirs[0]}`")
    else:
        say(f"  the temporary directory {base} is removed now (--keep keeps it, to look at with `seglog describe`)")
    return 0


def _demo_keeps(args: argparse.Namespace) -> bool:
    """Whether the demo's data stays once it ends: always in a --dir, in a temporary directory
    only with --keep."""
    return bool(args.dir) or bool(args.keep)


def _remove_tree(path: str) -> None:
    """Remove ``path``; a second Ctrl-C meanwhile does not cut the removal short."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def run_demo(args: argparse.Namespace) -> int:
    """Either demo in ``--dir`` or a new temporary directory, removed at the end (also on
    Ctrl-C or an error) unless ``--keep``."""
    if args.single and args.records is None:
        args.records = 1_000_000
    args.base = os.path.abspath(args.dir) if args.dir else tempfile.mkdtemp(prefix="seglog-demo-")
    try:
        return _single_demo(args) if args.single else _cluster_demo(args)
    except KeyboardInterrupt:
        if _demo_keeps(args):
            args.interrupted = f"interrupted; the data is kept in {args.base}"
        raise
    finally:
        if not _demo_keeps(args):
            _remove_tree(args.base)
