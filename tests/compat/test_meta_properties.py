"""``meta.properties`` as Kafka writes and reads it (``MetaProperties``; a java.util.Properties
file): the store writes it in a writable dir, keeps an existing one, refuses a malformed one
naming the file. The JDK's own ``Properties.load`` is the independent reader."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from seglog import Store
from seglog.errors import KafkaStorageError
from seglog.storage.checkpoints import CorruptCheckpointError, parse_properties, read_meta_properties

# A ZooKeeper-mode Kafka 3.x broker's file: Properties.store(writer, "") output.
KAFKA_WRITTEN = "#\n#Tue Jan 09 10:15:32 UTC 2024\ncluster.id=Wz6mZ3QxRkKbL2Y8vX1t2A\nversion=0\nbroker.id=1\n"

JAVA_READER = """
import java.io.FileInputStream;
import java.util.Properties;
import java.util.TreeSet;
public class ReadProps {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { p.load(in); }
        for (String k : new TreeSet<String>(p.stringPropertyNames())) {
            System.out.println(k + "\\t" + p.getProperty(k));
        }
    }
}
"""


def _java_load(path: Path, tmp_path: Path) -> dict[str, str]:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH to read the file with java.util.Properties")
    src = tmp_path / "ReadProps.java"
    src.write_text(JAVA_READER)
    out = subprocess.run(["java", str(src), str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return dict(line.split("\t", 1) for line in out.stdout.splitlines())


def test_store_writes_a_zookeeper_mode_meta_properties(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    with Store.open(d, {"broker.id": 3}):
        pass
    path = d / "meta.properties"
    lines = path.read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#") and lines[1].endswith(" UTC " + lines[1][-4:])
    assert lines[2:] == ["version=0", "broker.id=3"]
    assert _java_load(path, tmp_path) == {"version": "0", "broker.id": "3"}
    # A store without a broker id writes no id: any broker accepts the dir and adds its own.
    with Store.open(tmp_path / "plain"):
        pass
    assert _java_load(tmp_path / "plain" / "meta.properties", tmp_path) == {"version": "0"}
    # Read-only opens write nothing.
    (tmp_path / "ro").mkdir()
    with Store.open(tmp_path / "ro", read_only=True):
        pass
    assert not (tmp_path / "ro" / "meta.properties").exists()


def test_existing_meta_properties_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text(KAFKA_WRITTEN)
    with Store.open(tmp_path, {"broker.id": 1}) as store:
        store.create_topic("t", 1)
    assert path.read_text() == KAFKA_WRITTEN
    with Store.open(tmp_path):
        pass
    assert path.read_text() == KAFKA_WRITTEN
    # Another broker's dir is refused, as Kafka refuses it (InconsistentBrokerIdException).
    with pytest.raises(KafkaStorageError, match=r"meta.properties belongs to broker 1.*broker 2"):
        Store.open(tmp_path, {"broker.id": 2})
    assert path.read_text() == KAFKA_WRITTEN
    # A version-0 file without broker.id gets the configured one, other keys kept.
    path.write_text("#\n#Tue Jan 09 10:15:32 UTC 2024\ncluster.id=abc\nversion=0\n")
    with Store.open(tmp_path, {"node.id": 4}):
        pass
    assert _java_load(path, tmp_path) == {"cluster.id": "abc", "version": "0", "broker.id": "4"}


@pytest.mark.parametrize(
    "text,message",
    [
        ("version=2\nbroker.id=0\n", "unknown meta.properties version '2'"),
        ("version=zero\n", "unknown meta.properties version 'zero'"),
        ("version=0\nbroker.id=one\n", "broker.id 'one' is not a base-10 integer"),
        ("version=1\nnode.id=1\n", "version 1 requires cluster.id"),
        ("version=0\nbroker.id=\\u12\n", "malformed"),
    ],
)
def test_malformed_meta_properties_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "meta.properties"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match=message) as info:
        Store.open(tmp_path)
    assert str(path) in str(info.value)
    assert path.read_text() == text  # left as it was


def test_properties_syntax_matches_java(tmp_path: Path) -> None:
    text = (
        "! comment\n  # another\nversion = 0\nbroker.id:7\ncluster.id  abc\\\n   def\n"
        "a\\=b=c\\:d\nempty=\nuni=caf\\u00e9\n"
    )
    path = tmp_path / "p.properties"
    path.write_text(text)
    assert parse_properties(text) == _java_load(path, tmp_path)
    meta = read_meta_properties(str(path))
    assert meta is not None and meta["cluster.id"] == "abcdef"
    # And what we write, Java reads back unchanged.
    from seglog.storage.checkpoints import format_properties

    props = {"version": "0", "broker.id": "5", "x y": " lead=a:b#c!d\\e\tcafé"}
    path.write_bytes(format_properties(props))
    assert _java_load(path, tmp_path) == props
