"""The package's store (:class:`seglog.Store`): a Kafka-layout log directory
(:class:`seglog.storage.log_manager.LogManager`) with the embedded producer and consumer, and
Kafka's wire protocol served from it.

>>> import tempfile
>>> from seglog import Store
>>> with Store.open(tempfile.mkdtemp()) as store:
...     _ = store.create_topic("orders", partitions=3)
...     producer = store.producer()
...     producer.send("orders", b"hello", key=b"user-42").offset
...     consumer = store.consumer(group_id="billing", auto_offset_reset="earliest")
...     consumer.subscribe(["orders"])
...     [(r.key, r.value) for r in consumer.poll()]
...     consumer.commit()
0
[(b'user-42', b'hello')]

Every method of the log dir (topics, appends, reads, checkpoints, retention, compaction, close)
is :class:`~seglog.storage.log_manager.LogManager`'s; closing the store closes its producers
(sending what they hold) and consumers first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from seglog.client.consumer import Consumer
from seglog.client.producer import Producer
from seglog.storage.log_manager import LogManager

if TYPE_CHECKING:
    from seglog.kafka.server import ServerHandle

__all__ = ["Store"]


class Store(LogManager):
    """A Kafka-layout log directory with its embedded clients. Create with :meth:`open`."""

    def producer(self, config: Mapping[str, Any] | None = None, **settings: Any) -> Producer:
        """An embedded producer (see :class:`seglog.client.producer.Producer`); settings by Kafka key in
        ``config`` or by attribute name: ``acks``, ``linger_ms``, ``batch_size``,
        ``compression_type``, ``enable_idempotence``..."""
        self._check_writable()
        p = Producer(self, config, **settings)
        self._clients.append(p)
        return p

    def consumer(
        self, group_id: str | None = None, config: Mapping[str, Any] | None = None, **settings: Any
    ) -> Consumer:
        """An embedded consumer (see :class:`seglog.client.consumer.Consumer`)."""
        self._check_open()
        c = Consumer(self, group_id, config, **settings)
        self._clients.append(c)
        return c

    def serve(self, host: str = "127.0.0.1", port: int = 0, **options: Any) -> ServerHandle:
        """Serve this store to Kafka clients over Kafka's wire protocol, on ``host:port``
        (port 0: a free port) from a thread of its own, until the returned handle's ``close()``
        (or the end of a ``with`` block, or closing the store). ``handle.bootstrap_servers`` is
        the ``host:port`` to give clients. The listener's limits come from the store's broker
        config (``socket.request.max.bytes``, ``connections.max.idle.ms``,
        ``group.min.session.timeout.ms``, ``group.max.session.timeout.ms``,
        ``group.initial.rebalance.delay.ms``); options override them: ``node_id``,
        ``max_request_bytes``, ``idle_ms``, ``group_min_session_timeout_ms``,
        ``group_max_session_timeout_ms``, ``group_initial_rebalance_delay_ms``. Security:
        ``security_protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``ssl_context`` (an
        ``ssl.SSLContext`` or Kafka's ``ssl.*`` keys for PEM files), ``sasl_mechanisms``
        (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and ``users`` (name -> password, or -> SCRAM
        credentials). See ``docs/kafka-protocol.md``."""
        # Imported on first use, for start-up time (asyncio, ssl and the protocol tables).
        from seglog.kafka.server import ServerHandle

        self._check_open()
        return ServerHandle(self, host, port, **options)
