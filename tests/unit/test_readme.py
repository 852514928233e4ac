"""The README's example runs as written."""
import re

from tests.conftest import ROOT


def test_readme_example_runs(capsys):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README lost its example"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "0 2"
    assert out[1:] == ["0 b'k1' b'first'", "1 b'k2' b'second'", "2 b'k1' None"]
