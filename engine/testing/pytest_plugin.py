"""pytest plugin (registered through the ``pytest11`` entry point): a ``kafka_broker`` fixture.

``kafka_broker`` is a fresh seglog store in the test's temporary directory, served over Kafka's
protocol on a free loopback port for the duration of the test::

    def test_my_consumer(kafka_broker):
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
        ...
        kafka_broker.store.log("orders", 0)     # what the broker holds, read directly

Starting one takes about a millisecond, so each test gets its own broker. Topics are created on
first use (``auto.create.topics.enable``) or with ``kafka_broker.store.create_topic(...)``.
Broker keys for the store can be set with ``@pytest.mark.kafka_broker_config({...})``; unless
they say otherwise, ``group.initial.rebalance.delay.ms`` is 0 so that consumer groups form at
once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_broker_config(mapping): broker keys of the kafka_broker fixture's store")


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A seglog store served to Kafka clients: ``.bootstrap_servers``, ``.store``, ``.port``."""
    from seglog import Store

    marker = request.node.get_closest_marker("kafka_broker_config")
    # Consumer groups form at once, as in Kafka's own test setups, unless the marker says.
    config = {"group.initial.rebalance.delay.ms": 0}
    if marker is not None and marker.args:
        config.update(marker.args[0])
    store = Store.open(tmp_path_factory.mktemp("kafka-broker"), config)
    try:
        handle = store.serve()
        try:
            yield handle
        finally:
            handle.close()
    finally:
        store.close()
