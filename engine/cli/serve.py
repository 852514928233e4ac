"""``seglog serve`` (a store as a one-node Kafka broker) and ``seglog node`` (one replica node
process); :func:`serve_until_stopped`, the serving loop they and the benchmarks' null broker run."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from seglog.cli.common import CliError
from seglog.config import BrokerConfig, parse_properties_entries, read_properties_text
from seglog.errors import ConfigError
from seglog.store import Store

if TYPE_CHECKING:
    from seglog.kafka.server import KafkaServer

__all__ = ["run_node", "run_serve", "serve_until_stopped"]


def serve_until_stopped(make_server: Callable[[], KafkaServer], started: Callable[[KafkaServer], str]) -> None:
    """Serve Kafka clients until SIGINT or SIGTERM.

    In a new event loop: build the server with ``make_server``, start it, write the line
    ``started(server)`` to stderr (what scripts wait for: it names the address), then close the
    server once either signal arrives.
    """
    # lazy: asyncio loads only for the serving commands (keeps start-up fast)
    import asyncio
    import gc

    async def serve() -> None:
        server = make_server()
        await server.start()
        gc.freeze()  # start-up's objects out of the collector's full passes (as `seglog node`)
        sys.stderr.write(started(server) + "\n")
        sys.stderr.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await server.close()

    asyncio.run(serve())


def run_node(args: argparse.Namespace) -> int:
    """``seglog node``: one replica node process, from a properties file of broker keys."""
    # lazy: the node server loads only for this command (keeps start-up fast)
    from seglog.cluster.server import run

    overrides: dict[str, str] = {}
    for item in args.override or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CliError(f"--override {item!r}: expected key=value")
        overrides[key.strip()] = value.strip()
    if not os.path.isfile(args.config):
        raise CliError(f"{args.config}: no such file")
    return run(args.config, overrides)


def run_serve(args: argparse.Namespace) -> int:
    """``seglog serve``: the store as a one-node Kafka broker until SIGINT/SIGTERM."""
    # lazy: the Kafka listener loads only for this command (keeps start-up fast)
    from seglog.kafka.security import is_security_key, listener_options
    from seglog.kafka.server import KafkaServer

    config = None
    security: dict[str, str] = {}
    listeners: list[str] = []
    if args.config:
        if not os.path.isfile(args.config):
            raise CliError(f"{args.config}: no such file")
        # Listener security keys (ssl.*, sasl.*, listener.name.*) are the listener's, the rest
        # the store's.
        entries = parse_properties_entries(read_properties_text(args.config), args.config)
        security = {k: v for k, (v, _) in entries.items() if is_security_key(k)}
        rest = {k: v for k, (v, _) in entries.items() if not is_security_key(k)}
        try:
            config = BrokerConfig.from_dict(rest)
        except ConfigError as exc:
            line = entries[exc.key][1] if exc.key in entries else None
            raise CliError(f"{exc.message} (in {args.config}" + (f", line {line})" if line else ")")) from None
        listeners = [v.strip() for v in rest.get("listeners", "").split(",") if v.strip()]
    listen = args.listen
    if listen is None:
        if len(listeners) > 1:
            raise CliError(
                f"{args.config}: listeners has {len(listeners)} entries; seglog serve "
                f"serves one (pick it with --listen)"
            )
        listen = listeners[0] if listeners else "127.0.0.1:9092"
    try:
        _name, host, port, options = listener_options(listen, security)
    except ConfigError as exc:
        where = f" ({args.config})" if args.config else ""
        raise CliError(f"{'--listen: ' if args.listen else ''}{exc}{where}") from None

    with Store.open(args.dir, config) as store:
        serve_until_stopped(
            lambda: KafkaServer(store, host, port, **options),
            lambda server: (
                f"seglog serve: serving {store.dir} to Kafka clients on "
                f"{server.bootstrap_servers} ({options['security_protocol']})"
            ),
        )
    sys.stderr.write("seglog serve: stopped\n")
    return 0
