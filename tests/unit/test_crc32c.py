import json

from seglog._native.crc32c import crc32c


def test_vectors(fixtures_dir):
    vec = json.loads((fixtures_dir / "kafka-clients-generated" / "vectors.json").read_text())["crc32c"]
    inputs = {
        "123456789": b"123456789",
        "zeros32": bytes(32),
        "ff32": b"\xff" * 32,
        "inc32": bytes(range(32)),
        "dec32": bytes(range(31, -1, -1)),
        "SomeString": b"Some String",
        "empty": b"",
        "zeros4": bytes(4),
    }
    for name, data in inputs.items():
        want = vec[name]
        want = int(want) if name == "SomeString" else int(want, 16)
        assert crc32c(data) == want, name
