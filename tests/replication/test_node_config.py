"""``seglog node`` and ``seglog describe --bootstrap``: what they refuse, with messages that
name the key or the address (no ZooKeeper needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from seglog.cli import main
from seglog.cluster.client import format_describe, parse_bootstrap
from seglog.cluster.metadata import PartitionInfo, PartitionState
from seglog.cluster.server import (
    client_listener_security,
    load_config,
    load_security,
    node_transport_options,
    parse_listener,
    split_listeners,
)
from seglog.errors import ConfigError
from seglog.kafka.security import listener_options


def _props(tmp_path: Path, text: str) -> str:
    p = tmp_path / "node.properties"
    p.write_text(text)
    return str(p)


def test_node_requires_id_and_zookeeper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _props(tmp_path, f"log.dirs={tmp_path / 'd'}\nzookeeper.connect=127.0.0.1:1\n")
    assert main(["node", "--config", path]) == 1
    assert "node.id (or broker.id) is required" in capsys.readouterr().err
    path = _props(tmp_path, f"node.id=1\nlog.dirs={tmp_path / 'd'}\n")
    assert main(["node", "--config", path]) == 1
    assert "zookeeper.connect is required" in capsys.readouterr().err
    assert main(["node", "--config", str(tmp_path / "missing.properties")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["node", "--config", path, "--override", "nonsense"]) == 1
    assert "expected key=value" in capsys.readouterr().err


def test_node_config_overrides_and_listeners(tmp_path: Path) -> None:
    path = _props(
        tmp_path,
        f"node.id=1\nlog.dirs={tmp_path / 'd'}\nzookeeper.connect=h:2181/c\nlisteners=PLAINTEXT://127.0.0.1:9092\n",
    )
    cfg = load_config(path, {"zookeeper.session.timeout.ms": "3000", "node.id": "4"})
    assert (cfg.effective_node_id, cfg.zookeeper_session_timeout_ms) == (4, 3000)
    assert parse_listener(cfg.listeners[0]) == ("127.0.0.1", 9092)
    assert parse_listener("PLAINTEXT://:0") == ("", 0)
    assert parse_listener("PLAINTEXT://[::1]:19092") == ("::1", 19092)
    for bad in ("127.0.0.1:9092", "PLAINTEXT://host", "PLAINTEXT://host:99999"):
        with pytest.raises(Exception, match="listener"):
            parse_listener(bad)
    two = _props(tmp_path, f"node.id=1\nlog.dirs={tmp_path / 'a'},{tmp_path / 'b'}\nzookeeper.connect=h:1\n")
    assert load_config(two).effective_log_dirs == (str(tmp_path / "a"), str(tmp_path / "b"))
    twice = _props(
        tmp_path, f"node.id=1\nlog.dirs={tmp_path / 'a'},{tmp_path / 'b'},{tmp_path / 'a'}/\nzookeeper.connect=h:1\n"
    )
    with pytest.raises(Exception, match=r"log dir .*/a/ is listed twice"):
        load_config(twice)


def test_node_listeners_between_nodes_and_for_kafka_clients(tmp_path: Path) -> None:
    base = f"node.id=1\nlog.dirs={tmp_path / 'd'}\nzookeeper.connect=h:1\n"
    one = load_config(_props(tmp_path, base + "listeners=PLAINTEXT://:9092\n"))
    assert split_listeners(one) == ("PLAINTEXT://:9092", [])
    mapped = "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
    two = load_config(_props(tmp_path, base + mapped + "listeners=PLAINTEXT://:9092,CLIENT://:9093\n"))
    assert split_listeners(two) == ("PLAINTEXT://:9092", ["CLIENT://:9093"])  # the first by default
    named = load_config(
        _props(
            tmp_path,
            base + mapped + "listeners=CLIENT://:9093,INTERNAL://:9094\ninter.broker.listener.name=INTERNAL\n",
        )
    )
    assert split_listeners(named) == ("INTERNAL://:9094", ["CLIENT://:9093"])
    with pytest.raises(Exception, match=r"inter.broker.listener.name NODES is not a listener \(PLAINTEXT, CLIENT\)"):
        load_config(
            _props(tmp_path, base + mapped + "listeners=PLAINTEXT://:1,CLIENT://:2\ninter.broker.listener.name=NODES\n")
        )
    with pytest.raises(Exception, match="listeners names PLAINTEXT twice"):
        load_config(_props(tmp_path, base + "listeners=PLAINTEXT://:1,PLAINTEXT://:2\n"))
    with pytest.raises(Exception, match="listener"):
        load_config(_props(tmp_path, base + mapped + "listeners=PLAINTEXT://:1,CLIENT://nope\n"))


def test_node_listener_security_keys(tmp_path: Path) -> None:
    base = f"node.id=1\nlog.dirs={tmp_path / 'd'}\nzookeeper.connect=h:1\nlisteners=PLAINTEXT://:1,CLIENT://:2\n"
    sasl = (
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:SASL_PLAINTEXT\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        'required user_alice="alice-secret";\n'
    )
    path = _props(tmp_path, base + sasl)
    cfg = load_config(path)  # the security keys are the listeners', not BrokerConfig's
    assert split_listeners(cfg) == ("PLAINTEXT://:1", ["CLIENT://:2"])
    security = load_security(path)
    assert security["sasl.enabled.mechanisms"] == "PLAIN"
    _name, _host, _port, options = listener_options("CLIENT://:2", security)
    assert options["security_protocol"] == "SASL_PLAINTEXT"
    assert options["sasl_mechanisms"] == ["PLAIN"]
    # Kafka's rule: a listener name that is not a protocol must be mapped to one.
    with pytest.raises(
        ConfigError, match="CLIENT is not a security protocol and not in listener.security.protocol.map"
    ):
        load_config(_props(tmp_path, base))
    # The listener between nodes may be secured too; nodes authenticate to each other with
    # SCRAM-SHA-256 as the user of its ScramLoginModule config.
    nodes_sasl = sasl.replace("PLAINTEXT:PLAINTEXT", "PLAINTEXT:SASL_PLAINTEXT")
    with pytest.raises(
        ConfigError, match=r"the listener between nodes \(PLAINTEXT://:1\) does not enable SCRAM-SHA-256"
    ):
        load_config(_props(tmp_path, base + nodes_sasl))
    nodes_sasl = nodes_sasl.replace("sasl.enabled.mechanisms=PLAIN", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256")
    with pytest.raises(ConfigError, match=r"listener\.name\.plaintext\.scram-sha-256\.sasl\.jaas\.config must give"):
        load_config(_props(tmp_path, base + nodes_sasl))
    scram = (
        "listener.name.plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram."
        'ScramLoginModule required username="nodes" password="nodes-secret";\n'
    )
    path = _props(tmp_path, base + nodes_sasl + scram)
    cfg = load_config(path)
    opts = node_transport_options("PLAINTEXT://:1", load_security(path))
    assert (opts["security_protocol"], opts["sasl_user"], opts["sasl_password"]) == (
        "SASL_PLAINTEXT",
        "nodes",
        "nodes-secret",
    )
    # The client listener is built without the keys about reaching other nodes.
    assert listener_options("CLIENT://:2", client_listener_security("PLAINTEXT://:1", load_security(path)))[3]["users"]
    with pytest.raises(ConfigError, match="'GSSAPI' is not served"):
        load_config(
            _props(tmp_path, base + sasl.replace("sasl.enabled.mechanisms=PLAIN", "sasl.enabled.mechanisms=GSSAPI"))
        )


def test_describe_needs_a_dir_or_a_bootstrap(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["describe"]) == 1
    assert "--bootstrap" in capsys.readouterr().err
    assert main(["describe", str(tmp_path), "--bootstrap", "127.0.0.1:1"]) == 1
    assert "not both" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not host:port"):
        parse_bootstrap("localhost")
    assert parse_bootstrap("a:1, b:2") == ["a:1", "b:2"]


def test_format_describe_is_kafka_topics_layout() -> None:
    parts = [
        PartitionInfo("t", 1, (2, 0, 1), PartitionState(-1, 3, (2,), (), 5, 1)),
        PartitionInfo("t", 0, (0, 1, 2), PartitionState(1, 2, (1, 2, 0), (), 4, 1)),
    ]
    assert format_describe(parts) == (
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 3\n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 0,1,2\tIsr: 1,2,0\n"
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,0,1\tIsr: 2\n"
    )
