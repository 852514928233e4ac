"""Apache Kafka's Java client (kafka-clients 3.9) against a store served over Kafka's protocol:
AdminClient create/describe/list/delete, an idempotent acks=all producer with each codec, keys
and headers, a group consumer that commits (``tests/kafka/java/JavaClientCheck.java``, compiled
with ``javac`` into the test's temporary directory).

The jars come from the PyPI wheel ``shigawire-apache-flink-libraries`` (the ``test`` extra),
which carries kafka-clients and its dependencies under ``pyflink/lib/``."""

from __future__ import annotations

import pytest

from seglog import Store
from seglog.kafka.security import ScramCredential
from seglog.storage.records import batch_headers
from tests.conftest import KAFKA_CODECS

from .conftest import JAVA_CLIENT_CHECK, compile_java, java_unavailable, run_java_client_check
from .tls import make_tls

CODECS = KAFKA_CODECS


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    reason = java_unavailable()
    if reason is not None:
        pytest.skip(reason)
    return compile_java(tmp_path_factory.mktemp("java-classes"), JAVA_CLIENT_CHECK)


def _check_store(store: Store, prefix: str) -> None:
    for codec, code in CODECS.items():
        topic = f"{prefix}-{codec}"
        heads = [h for p in range(3) for h in batch_headers(store.log(topic, p).read(0, 1 << 24).to_bytes())]
        assert sum(h.records_count for h in heads) == 200
        # Idempotent: every batch has the producer id InitProducerId gave, and sequences.
        assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in heads)
        assert {h.compression for h in heads} == {code}
    committed = store.group_offsets.group_offsets(f"{prefix}-group")
    assert sum(om.offset for om in committed.values()) == 200 * len(CODECS)
    assert f"{prefix}-deleted" not in store.topics()


def test_java_client_plaintext(java_classpath, tmp_path):
    with Store.open(tmp_path / "data") as store, store.serve() as broker:
        out = run_java_client_check(java_classpath, broker.bootstrap_servers, "jp")
        assert out.count("OK ") == 8, out
        _check_store(store, "jp")


def test_java_client_sasl_ssl_scram(java_classpath, tmp_path):
    tls = make_tls(tmp_path)
    users = {"alice": [ScramCredential.from_password("alice-secret", "SCRAM-SHA-512", 8192)]}
    with (
        Store.open(tmp_path / "data") as store,
        store.serve(
            security_protocol="SASL_SSL", users=users, ssl_context={"ssl.keystore.location": str(tls.server)}
        ) as broker,
    ):
        out = run_java_client_check(
            java_classpath,
            broker.bootstrap_servers,
            "js",
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-512",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="alice-secret";',
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={tls.ca}",
        )
        assert out.count("OK ") == 8, out
        _check_store(store, "js")
