"""The README's examples run as written."""

import re

from tests.conftest import ROOT


def test_readme_example_runs(capsys):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 4, "the README lost an example"
    outputs = []
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
        outputs.append(capsys.readouterr().out.splitlines())
    store_out, log_out, cluster_out, served_out = outputs
    # The store: the future's offset, then every record of the three partitions.
    assert store_out[0] == "0"
    assert sorted(store_out[1:]) == ["0 b'order-17' b'created'", "0 b'x' b'a'", "0 b'z' b'c'", "1 b'y' b'b'"]
    # The replicated cluster: the acknowledged record survives its leader's death.
    assert cluster_out == ["[b'created']"]
    # `seglog serve`: kafka-python through the store's Kafka listener.
    assert served_out == ["[b'created']"]
    assert log_out[0] == "0 2"
    assert log_out[1:] == ["0 b'k1' b'first'", "1 b'k2' b'second'", "2 b'k1' None"]
