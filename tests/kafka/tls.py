"""Certificates for the TLS tests of this folder: a throwaway CA, a server and a client."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from pathlib import Path


class TLSFiles:
    """The PEM files ``make_tls`` writes under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = root / "ca.pem"
        self.server = root / "server.pem"  # key + certificate chain
        self.server_cert = root / "server-cert.pem"
        self.server_key = root / "server-key.pem"
        self.client_cert = root / "client-cert.pem"
        self.client_key = root / "client-key.pem"


def make_tls(root: Path) -> TLSFiles:
    """A test CA, a server certificate for localhost and 127.0.0.1 and a client certificate,
    written as PEM files under ``root`` (with the cryptography package, else openssl)."""
    files = TLSFiles(root)
    try:  # an optional dependency: openssl's command line stands in without it
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        _make_tls_openssl(files)
        return files
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("seglog test CA"))
        .issuer_name(name("seglog test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, san: list) -> tuple:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, b.sign(ca_key, hashes.SHA256())

    pem = serialization.Encoding.PEM

    def key_pem(key) -> bytes:
        return key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    skey, scert = leaf("localhost", [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    ckey, ccert = leaf("client-1", [])
    files.ca.write_bytes(ca.public_bytes(pem))
    files.server_cert.write_bytes(scert.public_bytes(pem) + ca.public_bytes(pem))
    files.server_key.write_bytes(key_pem(skey))
    files.server.write_bytes(key_pem(skey) + scert.public_bytes(pem))
    files.client_cert.write_bytes(ccert.public_bytes(pem))
    files.client_key.write_bytes(key_pem(ckey))
    return files


def _make_tls_openssl(files: TLSFiles) -> None:
    root = files.root

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=root)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=seglog test CA",
    )
    (root / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for who, subj, ext in (("server", "/CN=localhost", ["-extfile", "san.ext"]), ("client", "/CN=client-1", [])):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}-key.pem", "-out", f"{who}.csr", "-subj", subj)
        run(
            "x509",
            "-req",
            "-in",
            f"{who}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            f"{who}-cert.pem",
            "-days",
            "1",
            *ext,
        )
    files.server.write_bytes(files.server_key.read_bytes() + files.server_cert.read_bytes())
