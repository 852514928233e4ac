"""The ``seglog`` command line."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from seglog.records import batch_headers, decode_columns, decode_records, encode_batch

    out_dir = args.dir or tempfile.mkdtemp(prefix="seglog-demo-")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "%020d.log" % 0)
    n_batches, per_batch = args.batches, args.records
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    print(f"seglog demo: writing {n_batches} record batches of {per_batch} records to {path}")
    t0 = time.perf_counter()
    offset = 0
    written = 0
    with open(path, "wb") as f:
        for b in range(n_batches):
            values = [b"value-%08d " % (offset + i) + b"x" * 80 for i in range(per_batch)]
            keys = [b"key-%d" % ((offset + i) % 100) for i in range(per_batch)]
            codec = codecs[b % len(codecs)]
            batch = encode_batch(values, keys=keys, base_offset=offset, compression=codec,
                                 partition_leader_epoch=0)
            f.write(batch)
            written += len(batch)
            offset += per_batch
    t_write = time.perf_counter() - t0
    print(f"  wrote {offset:,} records, {written:,} bytes in {t_write:.3f} s "
          f"(codecs rotating through {', '.join(codecs)})")

    with open(path, "rb") as f:
        data = f.read()
    t0 = time.perf_counter()
    heads = batch_headers(data, verify_crc=True)
    cols = decode_columns(data)
    t_cols = time.perf_counter() - t0
    t0 = time.perf_counter()
    recs = decode_records(data)
    t_recs = time.perf_counter() - t0
    assert cols.count == len(recs) == offset
    assert recs[0].offset == 0 and recs[-1].offset == offset - 1
    print(f"  read back {len(heads)} batches, every CRC verified: {cols.count:,} records as columns "
          f"in {t_cols:.3f} s, as record objects in {t_recs:.3f} s")
    first, last = recs[0], recs[-1]
    print(f"  first record: offset {first.offset}, key {first.key!r}, value {first.value[:16]!r}...")
    print(f"  last record:  offset {last.offset}, key {last.key!r}, value {last.value[:16]!r}...")
    if not args.dir:
        print(f"  (files left in {out_dir})")
    return 0


def _cluster_demo(args: argparse.Namespace) -> int:
    """The three-replica story: produce, kill the leader, watch the ISR shrink and the
    election, keep producing, restart the node and watch it rejoin, consume everything."""
    from seglog.cluster import LocalCluster

    def say(text: str) -> None:
        print(text, flush=True)

    n = args.records
    with LocalCluster(nodes=3, dir=args.dir) as cluster:
        say(f"seglog demo: three nodes on loopback TCP, data in {cluster.dir}")
        cluster.create_topic("orders", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        leader = cluster.leader("orders")
        say(f"  topic 'orders': leader node {leader}, ISR {cluster.isr('orders')}, min.insync.replicas=2")
        producer = cluster.producer(acks="all", enable_idempotence=True)
        acked: dict[bytes, int] = {}

        def produce(start: int, count: int) -> None:
            futures = [(b"order-%06d" % i, producer.send("orders", b"order-%06d" % i)) for i in range(start, start + count)]
            producer.flush(60)
            for v, f in futures:
                acked[v] = f.result().offset

        t0 = time.perf_counter()
        produce(0, n)
        say(f"  produced {n:,} records with acks=all in {time.perf_counter() - t0:.2f} s")
        assert leader is not None
        say(f"  killing the leader, node {leader} (abrupt: sockets closed, nothing flushed)")
        cluster.kill(leader)
        t0 = time.perf_counter()
        shown = ""
        while True:
            st = cluster.state("orders")
            line = f"leader {st.leader if st else '?'}, ISR {list(st.isr) if st else []}"
            if line != shown:
                say(f"    {time.perf_counter() - t0:5.2f} s  {line}")
                shown = line
            if st is not None and st.leader not in (-1, leader):
                break
            time.sleep(0.05)
        say(f"  node {cluster.leader('orders')} was elected (epoch {cluster.state('orders').leader_epoch}); "  # type: ignore[union-attr]
            "producing on")
        produce(n, n)
        say(f"  restarting node {leader}")
        cluster.restart(leader)
        cluster.wait_for(lambda: leader in cluster._state("orders", 0).isr, 30, "the ISR rejoin")  # type: ignore[union-attr]
        say(f"  node {leader} caught up and rejoined: ISR {cluster.isr('orders')}")
        producer.close()
        consumer = cluster.consumer()
        consumer.assign([("orders", 0)])
        got = []
        while len(got) < len(acked):
            batch = consumer.poll(2000)
            if not batch:
                break
            got += batch
        consumer.close()
        values = {r.value: r.offset for r in got}
        lost = [v for v in acked if values.get(v) != acked[v]]
        say(f"  consumed {len(got):,} records: {len(acked):,} acknowledged, {len(lost)} lost, "
            f"{len(got) - len(values)} duplicated")
        return 0 if not lost and len(got) == len(values) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seglog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="write and read back a segment file, showing what happens")
    demo.add_argument("--dir", help="directory to write into (default: a new temporary directory)")
    demo.add_argument("--batches", type=int, default=50, help="number of batches (default 50)")
    demo.add_argument("--records", type=int, default=2000, help="records per batch (default 2000)")
    demo.set_defaults(func=_demo)
    cdemo = sub.add_parser("cluster-demo", help="three replicas on loopback: kill the leader, "
                           "watch the election, lose nothing")
    cdemo.add_argument("--dir", help="directory for the nodes' data (default: a temporary one, removed)")
    cdemo.add_argument("--records", type=int, default=5000, help="records per phase (default 5000)")
    cdemo.set_defaults(func=_cluster_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
