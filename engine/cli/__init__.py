"""The ``seglog`` command line.

    seglog demo [--dir DIR | --keep] [--records N] three replicas: failover, rejoin, Spark count
    seglog demo --single [--records N]             one store end to end, with progress
    seglog describe DIR [--internal]               topics, partitions, offsets, segments, sizes
    seglog dump FILE... [--print-data-log] [--verify-index-only] [--index-sanity-check]
                                                   batches, records, index entries (kafka-dump-log)
    seglog produce DIR TOPIC [--file F]            lines as records
    seglog consume DIR TOPIC [--offset N | --timestamp T] [--format json]
    seglog serve DIR [--listen [NAME://]HOST:PORT] [--config F]
                                                   the store as a one-node Kafka broker
    seglog node --config F [--override KEY=VALUE]  one replica node process (ZooKeeper)
    seglog bench [--quick] [--only NAME...]        the benchmark suite beside its peers

Errors are one line on stderr naming the file, offset or option at fault (exit status 1; 2 for
a bad command line), never a traceback; Ctrl-C is one line too (exit status 130). Notes about
what a command chose to do (where ``consume`` starts, what ``dump`` skipped) go to stderr, so
stdout holds only records or dump output.

One module a command family, each with its ``run_<command>`` functions: ``demo``, ``dump``,
``serve`` (``serve`` and ``node``), ``topics`` (``describe``, ``produce``, ``consume``) and
``bench``; ``common`` holds what they share. This module builds the parser and dispatches.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from seglog.cli.bench import run_bench
from seglog.cli.common import CliError, codec_names
from seglog.cli.demo import run_demo
from seglog.cli.dump import run_dump
from seglog.cli.serve import run_node, run_serve
from seglog.cli.topics import run_consume, run_describe, run_produce
from seglog.errors import SeglogError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit status 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="seglog", description="An embedded commit log in Apache Kafka's on-disk format.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser(
        "demo",
        help="three replicas in one process: produce, kill the leader, "
        "rejoin, consume with nothing lost, Spark counts the files (--single: "
        "one store, a million records)",
    )
    demo.add_argument(
        "--dir",
        help="directory to work in, kept at the end (default: a new temporary "
        "directory, removed at the end unless --keep)",
    )
    demo.add_argument(
        "--records",
        type=int,
        default=None,
        help="records to produce (default 200,000 per phase; 1,000,000 with --single)",
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the temporary directory when the demo ends (it says where)"
    )
    demo.add_argument("--no-spark", action="store_true", help="leave out the Spark count")
    demo.add_argument(
        "--single", action="store_true", help="the single-store demo: produce, consume as Arrow columns, verify"
    )
    demo.add_argument("--partitions", type=int, default=3, help="--single: partitions of the topic (default 3)")
    demo.add_argument("--segment-bytes", type=int, default=16 << 20, help="--single: segment.bytes (default 16 MiB)")
    codecs = list(codec_names().values())
    demo.add_argument(
        "--compression", default="none", choices=codecs, help="--single: the producer's compression.type (default none)"
    )
    demo.set_defaults(func=run_demo)

    node = sub.add_parser(
        "node",
        help="run one replica node process (Kafka broker keys; ZooKeeper coordination); SIGTERM shuts it down cleanly",
    )
    node.add_argument(
        "--config",
        required=True,
        help="the node's .properties file (node.id, log.dirs, listeners, zookeeper.connect, ...)",
    )
    node.add_argument(
        "--override", action="append", metavar="KEY=VALUE", help="set a property over the file's (repeatable)"
    )
    node.set_defaults(func=run_node)

    describe = sub.add_parser(
        "describe",
        help="topics, partitions, offsets, segments and sizes of a log dir; "
        "with --bootstrap, each partition's Leader, Replicas and Isr in a running cluster",
    )
    describe.add_argument("dir", nargs="?", help="a store or a Kafka broker's log.dir")
    describe.add_argument(
        "--bootstrap",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="describe a running cluster (its nodes' Kafka listeners) as kafka-topics.sh --describe does",
    )
    describe.add_argument(
        "--timeout", type=float, default=10.0, help="--bootstrap: seconds to wait for a node to answer (default 10)"
    )
    describe.add_argument("--topic", help="only this topic")
    describe.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    describe.set_defaults(func=run_describe)

    dump = sub.add_parser("dump", help="print the batches, records and index entries of segment files")
    dump.add_argument(
        "files", nargs="+", metavar="FILE", help=".log, .index, .timeindex, .txnindex, .snapshot or checkpoint files"
    )
    dump.add_argument("--print-data-log", action="store_true", help="print every record too")
    dump.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check each index entry against the batch it names in the .log (an "
        "offset entry: the batch at its position ends at its offset; a time "
        "entry: the batch ending at its offset has its timestamp) and print "
        "only problems",
    )
    dump.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="check only the index files' own structure, as a broker does at startup",
    )
    dump.add_argument(
        "--max-message-size", type=int, default=5 * 1024 * 1024, help="largest batch to decode (default 5 MiB)"
    )
    dump.set_defaults(func=run_dump)

    produce = sub.add_parser("produce", help="append lines (stdin or a file) as records")
    produce.add_argument("dir")
    produce.add_argument("topic")
    produce.add_argument("--file", help="read lines from this file (default: stdin)")
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    produce.add_argument("--partition", type=int, help="write every record to this partition")
    produce.add_argument("--create", action="store_true", help="create the topic if it is missing")
    produce.add_argument("--partitions", type=int, default=1, help="partitions when creating (default 1)")
    produce.add_argument(
        "--compression", default="none", choices=codecs, help="the producer's compression.type (default none)"
    )
    produce.set_defaults(func=run_produce)

    consume = sub.add_parser("consume", help="print records as text or JSON lines")
    consume.add_argument("dir")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, help="only this partition")
    consume.add_argument("--offset", type=int, help="start at this offset (negative: that many before the end)")
    consume.add_argument("--timestamp", type=int, help="start at the first record at or after this time (ms)")
    consume.add_argument(
        "--from-beginning", action="store_true", help="start at the log start (the default without --group)"
    )
    consume.add_argument("--group", help="a consumer group: start at its committed offsets, commit at the end")
    consume.add_argument("--max-messages", type=int, help="stop after this many records")
    consume.add_argument("--format", choices=["text", "json"], default="text")
    consume.add_argument("--print-key", action="store_true", help="text format: print key<sep>value")
    consume.add_argument("--key-separator", default="\t", help="separator for --print-key (default TAB)")
    consume.add_argument(
        "--isolation-level", choices=["read_uncommitted", "read_committed"], default="read_uncommitted"
    )
    consume.add_argument("--timeout-ms", type=int, default=0, help="wait this long for new records")
    consume.set_defaults(func=run_consume)

    serve = sub.add_parser(
        "serve",
        help="serve a log dir to Kafka clients over Kafka's protocol (a one-node broker); SIGINT/SIGTERM stops it",
    )
    serve.add_argument("dir", help="the store's log dir (created if missing)")
    serve.add_argument(
        "--listen",
        default=None,
        metavar="[NAME://]HOST:PORT",
        help="address to listen on, with a security protocol (PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL) or a listener.security.protocol.map name "
        "(default: the config's listeners, else 127.0.0.1:9092; port 0: any free "
        "port)",
    )
    serve.add_argument(
        "--config",
        help="a .properties file of Kafka broker keys (log.segment.bytes, "
        "num.partitions, socket.request.max.bytes, ...)",
    )
    serve.set_defaults(func=run_serve)

    bench = sub.add_parser(
        "bench", help="the benchmark suite: seglog beside its peers, as a table, a JSON file and a chart"
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (1 M records for the streams), about ten minutes (what CI runs)",
    )
    bench.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="only these benchmarks (names, groups or patterns like 'encode-*'; see --list)",
    )
    bench.add_argument(
        "--out",
        default="seglog-bench",
        metavar="DIR",
        help="directory for results.json and ratios.png (default ./seglog-bench)",
    )
    bench.add_argument("--rounds", type=_positive, help="rounds per benchmark (default 3 quick, 5 full)")
    bench.add_argument(
        "--records", type=_positive, help="records for the benchmarks sized in records (overrides --quick/full sizes)"
    )
    bench.add_argument("--work-dir", help="where the benchmarks write their files (default: the temp dir)")
    bench.add_argument("--list", action="store_true", help="list the benchmarks and their goals, run nothing")
    bench.set_defaults(func=run_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return int(func(args))
    except CliError as exc:
        sys.stderr.write(f"seglog {args.command}: error: {exc}\n")
        return 1
    except BrokenPipeError:  # pragma: no cover - `seglog consume ... | head`
        return 0
    except (SeglogError, OSError, ValueError, TypeError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, SeglogError) and exc.filename is not None:
            # "x: Not a directory", not "[Errno 20] Not a directory: 'x'".
            sys.stderr.write(f"seglog {args.command}: error: {exc.filename}: {exc.strerror}\n")
        else:
            sys.stderr.write(f"seglog {args.command}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"seglog {args.command}: {getattr(args, 'interrupted', 'interrupted')}\n")
        return 130
