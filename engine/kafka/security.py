"""Listener security for the Kafka listener: TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

A listener has one of Kafka's security protocols: ``PLAINTEXT``, ``SSL`` (TLS),
``SASL_PLAINTEXT`` (SASL authentication, then plain requests) or ``SASL_SSL`` (both).

TLS is Python's :mod:`ssl`: an :class:`ssl.SSLContext` given by the program, or one built by
:func:`server_ssl_context` from Kafka's broker keys for PEM key stores (``ssl.keystore.type=PEM``
with ``ssl.keystore.location`` and ``ssl.key.password``, or the PEM text itself in
``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``; ``ssl.truststore.location`` /
``ssl.truststore.certificates`` and ``ssl.client.auth`` for client certificates).

SASL follows Kafka's broker (``SaslServerAuthenticator``): before a connection has
authenticated it may send ApiVersions, then SaslHandshake (v0 or v1) naming a mechanism; after
a v1 handshake the SASL tokens travel in SaslAuthenticate requests (v0-v2), after a v0 handshake
(KIP-43) as bare size-prefixed frames. Any other request before authentication closes the
connection without an answer. An unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM with
the enabled list, a failed authentication SASL_AUTHENTICATION_FAILED with a message; both then
close the connection (after ``connection.failed.authentication.delay.ms``, 100 ms), logged once. SCRAM (RFC 5802, RFC 7677) keeps per user only the salt,
iteration count, StoredKey and ServerKey (:class:`ScramCredential`); an unknown user runs
the whole exchange against a made-up credential and fails at the proof, so a client cannot
learn which users exist.

See ``docs/kafka-protocol.md`` ("Security") for configuring a listener.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from seglog.errors import (
    ConfigError,
    InvalidRequestError,
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from seglog.kafka import codec
from seglog.kafka.apis import API_NAMES, API_VERSIONS, api_versions_response
from seglog.kafka.codec import Message
from seglog.kafka.connection import (
    INT32,
    REQUEST_HEADER,
    CloseConnection,
    ConnState,
    FrameReader,
    read_frame,
    skip_tagged,
)

__all__ = [
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "AuthenticationClosed",
    "ListenerSecurity",
    "ScramCredential",
    "client_ssl_context",
    "listener_options",
    "read_users_file",
    "sasl_mechanism_list",
    "server_ssl_context",
]

log = logging.getLogger("seglog.kafka")

#: Kafka's security protocols, as named in ``listeners`` / ``listener.security.protocol.map``.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms served.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Kafka's ``sasl.server.max.receive.size``: the largest frame taken before authentication.
SASL_MAX_RECEIVE_SIZE = 524288
#: Kafka's bounds on SCRAM iterations.
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
#: Kafka's ``connection.failed.authentication.delay.ms`` default: a failed authentication's
#: answer is followed by this pause before the connection closes, so that the client reads the
#: answer before it sees the close, and password guessing is slowed down.
FAILED_AUTHENTICATION_DELAY_MS = 100

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_API_NAMES = {17: "SaslHandshake", 18: "ApiVersions", 36: "SaslAuthenticate"}


class AuthenticationClosed(Exception):
    """The connection must close before or during authentication; the message says why."""


# -- credentials ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a SCRAM user (RFC 5802): salt, iteration count, StoredKey and
    ServerKey, never the password. Text form as Kafka's: ``salt=<b64>,stored_key=<b64>,
    server_key=<b64>,iterations=<n>``."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __post_init__(self) -> None:
        if self.mechanism not in _HASHES:
            raise ConfigError(
                f"SCRAM mechanism {self.mechanism!r} is not one of {', '.join(_HASHES)}", key=None, value=self.mechanism
            )
        if not SCRAM_MIN_ITERATIONS <= self.iterations <= SCRAM_MAX_ITERATIONS:
            raise ConfigError(
                f"{self.mechanism} iterations {self.iterations} outside {SCRAM_MIN_ITERATIONS}-{SCRAM_MAX_ITERATIONS}",
                key=None,
                value=self.iterations,
            )
        size = hashlib.new(_HASHES[self.mechanism]).digest_size
        if len(self.stored_key) != size or len(self.server_key) != size:
            raise ConfigError(f"{self.mechanism} stored_key and server_key must be {size} bytes", key=None, value=None)
        if not self.salt:
            raise ConfigError(f"{self.mechanism} credential has an empty salt", key=None, value=None)

    @classmethod
    def from_password(
        cls,
        password: str,
        mechanism: str = "SCRAM-SHA-256",
        iterations: int = SCRAM_MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        """Derive the credential of ``password`` (a random 32-byte salt unless given)."""
        if mechanism not in _HASHES:
            raise ConfigError(
                f"SCRAM mechanism {mechanism!r} is not one of {', '.join(_HASHES)}", key=None, value=mechanism
            )
        name = _HASHES[mechanism]
        salt = secrets.token_bytes(32) if salt is None else salt
        salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", name).digest()
        server_key = hmac.new(salted, b"Server Key", name).digest()
        return cls(mechanism, salt, hashlib.new(name, client_key).digest(), server_key, iterations)

    @classmethod
    def parse(cls, mechanism: str, text: str) -> ScramCredential:
        """Read Kafka's text form; ``iterations=<n>,password=<p>`` derives one instead."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.strip().partition("=")
            if not sep:
                raise ConfigError(f"{mechanism} credential: {part.strip()!r} is not key=value", key=None, value=text)
            fields[key.strip()] = value.strip()
        try:
            iterations = int(fields.get("iterations", SCRAM_MIN_ITERATIONS))
        except ValueError:
            raise ConfigError(
                f"{mechanism} credential: iterations {fields['iterations']!r} is not a number", key=None, value=text
            ) from None
        if "password" in fields:
            return cls.from_password(fields["password"], mechanism, iterations)
        missing = [k for k in ("salt", "stored_key", "server_key") if k not in fields]
        if missing:
            raise ConfigError(
                f"{mechanism} credential lacks {', '.join(missing)} (give salt, "
                f"stored_key, server_key and iterations, or iterations and password)",
                key=None,
                value=text,
            )
        try:
            raw = {k: base64.b64decode(fields[k], validate=True) for k in ("salt", "stored_key", "server_key")}
        except ValueError as exc:
            raise ConfigError(f"{mechanism} credential: bad base64 ({exc})", key=None, value=text) from None
        return cls(mechanism, raw["salt"], raw["stored_key"], raw["server_key"], iterations)

    def __str__(self) -> str:
        b64: Callable[[bytes], str] = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    def __repr__(self) -> str:
        return f"ScramCredential({self.mechanism!r}, iterations={self.iterations})"


class _User:
    __slots__ = ("password", "scram")

    def __init__(self) -> None:
        self.password: str | None = None
        self.scram: dict[str, ScramCredential] = {}


def _users(users: Mapping[Any, Any] | None, mechanisms: Iterable[str]) -> dict[str, _User]:
    """``users``: name -> password (every enabled mechanism; SCRAM credentials derived now with
    a random salt and 4096 iterations) or -> ScramCredential / list of them (SCRAM only)."""
    out: dict[str, _User] = {}
    scram_mechs = [m for m in mechanisms if m in _HASHES]
    for name, value in (users or {}).items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"user names are non-empty strings, got {name!r}", key=None, value=name)
        user = out.setdefault(name, _User())
        if isinstance(value, str):
            user.password = value
            for mech in scram_mechs:
                user.scram[mech] = ScramCredential.from_password(value, mech)
            continue
        creds = [value] if isinstance(value, ScramCredential) else list(value)
        for cred in creds:
            if not isinstance(cred, ScramCredential):
                raise ConfigError(
                    f"user {name!r}: expected a password or ScramCredential objects, got {cred!r}", key=None, value=None
                )
            user.scram[cred.mechanism] = cred
    return out


def read_users_file(path: str) -> dict[str, Any]:
    """Read a users file: one user a line, ``NAME MECHANISM=[CREDENTIAL],...`` in the syntax of
    Kafka's ``kafka-configs --add-config``, e.g.
    ``alice SCRAM-SHA-256=[salt=...,stored_key=...,server_key=...,iterations=8192]`` or
    ``bob PLAIN=[password=bob-secret],SCRAM-SHA-512=[iterations=8192,password=bob-secret]``;
    ``#`` starts a comment. Returns the ``users`` mapping of :class:`ListenerSecurity`."""
    users: dict[str, Any] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the users file: {exc.strerror}", key=None, value=None, path=path
        ) from None
    entry = re.compile(r"\s*([A-Za-z0-9-]+)\s*=\s*\[([^\]]*)\]\s*(?:,|$)")
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        where = f"{path}, line {number}"
        if not rest:
            raise ConfigError(f"{where}: expected NAME MECHANISM=[...], got {text!r}", key=None, value=text, path=path)
        creds: list[ScramCredential] = []
        password = None
        pos = 0
        while pos < len(rest):
            m = entry.match(rest, pos)
            if m is None:
                raise ConfigError(
                    f"{where}: cannot read {rest[pos:]!r} (expected MECHANISM=[key=value,...])",
                    key=None,
                    value=text,
                    path=path,
                )
            mech, body = m.group(1).upper(), m.group(2)
            pos = m.end()
            try:
                if mech == "PLAIN":
                    key, sep, value = body.partition("=")
                    if key.strip() != "password" or not sep:
                        raise ConfigError("PLAIN=[password=...] expected", key=None, value=body)
                    password = value
                elif mech in _HASHES:
                    creds.append(ScramCredential.parse(mech, body))
                else:
                    raise ConfigError(
                        f"unknown mechanism {mech!r} (one of {', '.join(SASL_MECHANISMS)})", key=None, value=mech
                    )
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc.message}", key=None, value=text, path=path) from None
        if name in users:
            raise ConfigError(f"{where}: user {name!r} is defined twice", key=None, value=text, path=path)
        users[name] = _FileUser(password, creds)
    return users


class _FileUser:
    """A users file entry: a PLAIN password and/or SCRAM credentials, as written."""

    __slots__ = ("creds", "password")

    def __init__(self, password: str | None, creds: list[ScramCredential]) -> None:
        self.password = password
        self.creds = creds


# -- the listener's security ----------------------------------------------------------------------


class ListenerSecurity:
    """One listener's security: the options of ``Store.serve`` / ``KafkaServer``.

    ``protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. ``ssl_context`` (SSL, SASL_SSL): a
    server :class:`ssl.SSLContext`, or a mapping of Kafka's ``ssl.*`` keys for
    :func:`server_ssl_context`. ``sasl_mechanisms``: some of PLAIN, SCRAM-SHA-256,
    SCRAM-SHA-512 (a list or a comma-separated string; default all three). ``users``: name ->
    password (PLAIN checks it; SCRAM credentials are derived from it now, random salt, 4096
    iterations), or -> a :class:`ScramCredential` or a list of them (SCRAM only, no password
    kept), or the entries of :func:`read_users_file`."""

    def __init__(
        self,
        protocol: str = "PLAINTEXT",
        *,
        ssl_context: Any = None,
        sasl_mechanisms: Iterable[str] | None = None,
        users: Mapping[str, Any] | None = None,
    ) -> None:
        protocol = protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security protocol {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}",
                key="security.protocol",
                value=protocol,
            )
        self.protocol = protocol
        self.tls = protocol in ("SSL", "SASL_SSL")
        self.sasl = protocol.startswith("SASL_")
        if isinstance(ssl_context, Mapping):
            ssl_context = server_ssl_context(ssl_context)
        if self.tls and not isinstance(ssl_context, ssl.SSLContext):
            raise ConfigError(
                f"a {protocol} listener needs ssl_context: an ssl.SSLContext or Kafka's ssl.keystore.* keys",
                key="ssl.keystore.location",
                value=None,
            )
        if not self.tls and ssl_context is not None:
            raise ConfigError(
                f"ssl_context given for a {protocol} listener (use SSL or SASL_SSL)",
                key="security.protocol",
                value=protocol,
            )
        self.ssl_context: ssl.SSLContext | None = ssl_context
        mechs = sasl_mechanism_list(sasl_mechanisms)
        if not self.sasl and (sasl_mechanisms or users):
            raise ConfigError(
                f"SASL mechanisms or users given for a {protocol} listener (use SASL_PLAINTEXT or SASL_SSL)",
                key="security.protocol",
                value=protocol,
            )
        if self.sasl and not mechs:
            raise ConfigError("sasl.enabled.mechanisms is empty", key="sasl.enabled.mechanisms", value="")
        self.mechanisms: list[str] = mechs if self.sasl else []
        plain: dict[str, Any] = {}
        for name, value in (users or {}).items():
            if isinstance(value, _FileUser):
                if value.password is not None:
                    plain[name] = value.password
                continue
            plain[name] = value
        self.users = _users(plain, self.mechanisms)
        for name, value in (users or {}).items():
            if isinstance(value, _FileUser):
                user = self.users.setdefault(name, _User())
                for cred in value.creds:
                    user.scram[cred.mechanism] = cred
        if self.sasl and not self.users:
            raise ConfigError(f"a {protocol} listener needs users (none defined)", key=None, value=None)
        # A per-listener secret for the made-up credentials of unknown users.
        self._decoy_secret = secrets.token_bytes(32)

    def __repr__(self) -> str:
        return f"<ListenerSecurity {self.protocol} mechanisms={self.mechanisms} users={len(self.users)}>"

    # -- mechanisms ---------------------------------------------------------------------------

    def _mechanism(self, name: str) -> _Plain | _Scram:
        if name == "PLAIN":
            return _Plain(self)
        return _Scram(self, name)

    def _decoy(self, mechanism: str, user: str) -> ScramCredential:
        name = _HASHES[mechanism]
        seed = hmac.new(self._decoy_secret, f"{mechanism}\0{user}".encode(), "sha256").digest()
        size = hashlib.new(name).digest_size
        return ScramCredential(
            mechanism, seed[:24], secrets.token_bytes(size), secrets.token_bytes(size), SCRAM_MIN_ITERATIONS
        )

    # -- the authentication phase of a connection -------------------------------------------

    async def authenticate(
        self, reader: FrameReader, writer: asyncio.StreamWriter, state: ConnState, idle_ms: int
    ) -> str:
        """Run SASL on a new connection; returns the authenticated user name. ``idle_ms``: the
        listener's ``connections.max.idle.ms``. Raises :class:`AuthenticationClosed` when the
        connection must close (after sending the error answer Kafka sends, if any)."""
        phase = "initial"
        mechanism: _Plain | _Scram | None = None
        headers = True
        while True:
            frame = await _read_frame(reader, idle_ms)
            if mechanism is not None and not headers:
                # KIP-43 v0: bare tokens after SaslHandshake v0.
                try:
                    answer = mechanism.evaluate(frame)
                except SaslAuthenticationError as exc:
                    await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_MS / 1000)
                    raise AuthenticationClosed(f"{mechanism.name} authentication failed: {exc}") from None
                if answer is not None:
                    await _write(writer, [answer])
                if mechanism.user is not None:
                    return mechanism.user
                continue
            if len(frame) < REQUEST_HEADER.size:
                raise AuthenticationClosed(
                    f"a frame of {len(frame)} bytes before authentication is too short for a request header"
                )
            api_key, version, cid, client_len = REQUEST_HEADER.unpack_from(frame, 0)
            pos = REQUEST_HEADER.size + max(client_len, 0)
            if pos > len(frame):
                raise AuthenticationClosed("request header's client id runs past the frame")
            if client_len > 0:
                state.client_id = str(frame[REQUEST_HEADER.size : pos], "utf-8", "replace")
            name = _API_NAMES.get(api_key)
            if phase == "authenticate":
                if api_key != 36:
                    raise AuthenticationClosed(
                        f"{_api_name(api_key)} request during SASL authentication (only "
                        f"SaslAuthenticate is allowed until it completes)"
                    )
                request = self._decode(name, version, frame, pos)
                assert name is not None and mechanism is not None
                out: Message = {"error_code": 0, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
                try:
                    answer = mechanism.evaluate(bytes(request["auth_bytes"] or b""))
                except SaslAuthenticationError as exc:
                    out["error_code"] = SaslAuthenticationError.code
                    out["error_message"] = str(exc)
                    await _write(writer, _encode(name, version, cid, out))
                    await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_MS / 1000)
                    raise AuthenticationClosed(f"{mechanism.name} authentication failed: {exc}") from None
                out["auth_bytes"] = answer or b""
                await _write(writer, _encode(name, version, cid, out))
                if mechanism.user is not None:
                    return mechanism.user
                continue
            if api_key == 18 and phase == "initial":
                versions = api_versions_response(memoryview(frame), pos, version, cid, state)
                await _write(writer, versions)
                lo, hi = API_VERSIONS[18]
                if lo <= version <= hi:
                    phase = "handshake"
                continue
            if api_key != 17:
                if api_key == 18:
                    raise AuthenticationClosed("a second ApiVersions request before SaslHandshake")
                raise AuthenticationClosed(
                    f"{_api_name(api_key)} request before SASL authentication (only ApiVersions, "
                    f"SaslHandshake and SaslAuthenticate are allowed until it completes)"
                )
            request = self._decode(name, version, frame, pos)
            assert name is not None
            wanted = request["mechanism"]
            if wanted not in self.mechanisms:
                await _write(
                    writer,
                    _encode(
                        name,
                        version,
                        cid,
                        {"error_code": UnsupportedSaslMechanismError.code, "mechanisms": self.mechanisms},
                    ),
                )
                await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_MS / 1000)
                raise AuthenticationClosed(
                    f"SASL mechanism {wanted!r} is not enabled (enabled: {', '.join(self.mechanisms)})"
                )
            await _write(writer, _encode(name, version, cid, {"error_code": 0, "mechanisms": self.mechanisms}))
            mechanism = self._mechanism(wanted)
            headers = version >= 1
            phase = "authenticate"

    def _decode(self, name: str | None, version: int, frame: bytes, pos: int) -> Message:
        assert name is not None
        lo, hi = _SASL_VERSIONS[name]
        if not lo <= version <= hi:
            raise AuthenticationClosed(f"{name} v{version} is not served (versions {lo}-{hi})")
        view = memoryview(frame)
        if codec.is_flexible(name + "Request", version):
            try:
                pos = skip_tagged(view, pos)
            except CloseConnection as exc:
                raise AuthenticationClosed(str(exc)) from None
        try:
            request, _end = codec.decode(name + "Request", version, view, pos)
        except InvalidRequestError as exc:
            raise AuthenticationClosed(f"{name} v{version}: {exc}") from None
        # Bytes past the request's last field are ignored, as in the request loop.
        return request


#: The SASL APIs' versions: those of the listener's ApiVersions table.
_SASL_VERSIONS = {"SaslHandshake": API_VERSIONS[17], "SaslAuthenticate": API_VERSIONS[36]}


def _api_name(api_key: int) -> str:
    return API_NAMES.get(api_key) or f"API key {api_key}"


async def _read_frame(reader: FrameReader, idle_ms: int) -> bytes:
    frame = await read_frame(
        reader,
        idle_ms,
        SASL_MAX_RECEIVE_SIZE,
        "sasl.server.max.receive.size",
        AuthenticationClosed,
        " before authenticating",
    )
    if frame is None:
        raise ConnectionResetError("closed by the client before authenticating")
    return frame if type(frame) is bytes else bytes(frame)  # SASL frames are small


def _encode(name: str, version: int, correlation_id: int, body: Message) -> list[Any]:
    out: list[Any] = [bytearray(INT32.pack(correlation_id))]
    if codec.is_flexible(name + "Response", version):
        out[0].append(0)
    return codec.encode(name + "Response", version, body, out)


async def _write(writer: asyncio.StreamWriter, parts: list[Any]) -> None:
    total = sum(memoryview(p).nbytes for p in parts)
    writer.write(INT32.pack(total))
    writer.writelines(parts)
    await writer.drain()


class _Plain:
    """SASL PLAIN (RFC 4616): one message ``authzid NUL authcid NUL password``."""

    name = "PLAIN"

    def __init__(self, security: ListenerSecurity) -> None:
        self.security = security
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes | None:
        if self.user is not None:
            raise SaslAuthenticationError("PLAIN authentication has already completed")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN message: {len(parts)} NUL-separated parts, expected 3")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN message: not UTF-8") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: no username given")
        if not password:
            raise SaslAuthenticationError("Authentication failed: no password given")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: the authorization id differs from the username")
        user = self.security.users.get(username)
        expected = user.password if user is not None else None
        # Compare even for an unknown user, so the time taken does not tell.
        ok = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        self.user = username
        return b""


_SASLNAME = re.compile(r"=(?!2C|3D)")


class _Scram:
    """SCRAM-SHA-256 / SCRAM-SHA-512 server side (RFC 5802, RFC 7677), without channel binding."""

    def __init__(self, security: ListenerSecurity, mechanism: str) -> None:
        self.security = security
        self.name = mechanism
        self.hash = _HASHES[mechanism]
        self.user: str | None = None
        self.step = 0
        self._username = ""
        self._cred: ScramCredential | None = None
        self._known = False
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def _fail(self) -> SaslAuthenticationError:
        self.step = -1
        return SaslAuthenticationError(
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.name}"
        )

    def evaluate(self, token: bytes) -> bytes | None:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail() from None
        if self.step == 0:
            return self._client_first(text)
        if self.step == 1:
            return self._client_final(text)
        raise SaslAuthenticationError(f"{self.name}: unexpected message after the exchange ended")

    def _client_first(self, text: str) -> bytes:
        # gs2-header: cbind-flag "," [ "a=" authzid ] ","
        flag, sep1, rest = text.partition(",")
        authz, sep2, bare = rest.partition(",")
        if not (sep1 and sep2) or flag not in ("n", "y"):
            if flag.startswith("p="):
                raise SaslAuthenticationError(f"{self.name}: channel binding is not supported")
            raise self._fail()
        if authz and not authz.startswith("a="):
            raise self._fail()
        attrs = bare.split(",")
        if len(attrs) < 2 or not attrs[0].startswith("n=") or not attrs[1].startswith("r="):
            raise self._fail()
        raw_name = attrs[0][2:]
        if _SASLNAME.search(raw_name):
            raise self._fail()
        username = raw_name.replace("=2C", ",").replace("=3D", "=")
        client_nonce = attrs[1][2:]
        if not username or not client_nonce:
            raise self._fail()
        extensions = dict(a.partition("=")[::2] for a in attrs[2:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise SaslAuthenticationError(f"{self.name}: delegation tokens are not supported")
        authzid = authz[2:].replace("=2C", ",").replace("=3D", "=") if authz else ""
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: the authorization id differs from the username")
        user = self.security.users.get(username)
        cred = user.scram.get(self.name) if user is not None else None
        self._known = cred is not None
        self._cred = cred if cred is not None else self.security._decoy(self.name, username)
        self._username = username
        self._gs2 = text[: len(flag) + len(authz) + 2]
        self._client_first_bare = bare
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(24)).decode().replace(",", "-")
        self._server_first = f"r={self._nonce},s={base64.b64encode(self._cred.salt).decode()},i={self._cred.iterations}"
        self.step = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise self._fail()
        attrs = without_proof.split(",")
        if len(attrs) < 2 or not attrs[0].startswith("c=") or not attrs[1].startswith("r="):
            raise self._fail()
        try:
            binding = base64.b64decode(attrs[0][2:], validate=True)
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise self._fail() from None
        # The nonce must end with the one the server sent, as Kafka checks it: librdkafka 2.0
        # (under kcat 1.7.1 on Debian) repeats its own nonce in front of it.
        if binding != self._gs2.encode() or not attrs[1][2:].endswith(self._nonce):
            raise self._fail()
        cred = self._cred
        assert cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac.new(cred.stored_key, auth_message, self.hash).digest()
        if len(proof) != len(client_signature):
            raise self._fail()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        stored = hashlib.new(self.hash, client_key).digest()
        if not hmac.compare_digest(stored, cred.stored_key) or not self._known:
            raise self._fail()
        server_signature = hmac.new(cred.server_key, auth_message, self.hash).digest()
        self.step = 2
        self.user = self._username
        return b"v=" + base64.b64encode(server_signature)


# -- TLS ------------------------------------------------------------------------------------------

#: Kafka's TLS keys served (PEM key stores only), besides the ``listener.name.<l>.`` forms.
SSL_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
)
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def server_ssl_context(config: Mapping[str, str]) -> ssl.SSLContext:
    """A server :class:`ssl.SSLContext` from Kafka's ``ssl.*`` broker keys (PEM key stores).

    ``ssl.keystore.location``: a PEM file holding the private key and the certificate chain
    (``ssl.key.password`` if the key is encrypted); or ``ssl.keystore.certificate.chain`` and
    ``ssl.keystore.key``: the PEM text itself. ``ssl.truststore.location`` (a PEM file of CA
    certificates) or ``ssl.truststore.certificates`` (PEM text) check client certificates when
    ``ssl.client.auth`` is ``requested`` or ``required`` (default ``none``).
    ``ssl.enabled.protocols``: TLSv1.2 and/or TLSv1.3 (default both); ``ssl.cipher.suites``:
    OpenSSL cipher names for TLS 1.2."""
    unknown = [k for k in config if k not in SSL_KEYS]
    if unknown:
        raise ConfigError(
            f"unknown or unsupported TLS key {unknown[0]!r} (served: {', '.join(SSL_KEYS)})",
            key=unknown[0],
            value=config[unknown[0]],
        )
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = config.get(key, "PEM").strip().upper()
        if kind != "PEM":
            raise ConfigError(
                f"{key}={kind}: only PEM key and trust stores are supported (convert "
                f"a JKS or PKCS12 store with keytool/openssl)",
                key=key,
                value=kind,
            )
    if config.get("ssl.keystore.password"):
        raise ConfigError(
            "ssl.keystore.password is not used for PEM key stores; give the key's password as ssl.key.password",
            key="ssl.keystore.password",
            value=None,
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    password = config.get("ssl.key.password") or None
    location = config.get("ssl.keystore.location")
    chain, key_text = config.get("ssl.keystore.certificate.chain"), config.get("ssl.keystore.key")
    try:
        if location:
            if chain or key_text:
                raise ConfigError(
                    "give either ssl.keystore.location or ssl.keystore.certificate."
                    "chain with ssl.keystore.key, not both",
                    key="ssl.keystore.location",
                    value=location,
                )
            ctx.load_cert_chain(location, password=password)
        elif chain and key_text:
            _load_pem_text(ctx, chain, key_text, password)
        else:
            raise ConfigError(
                "a TLS listener needs ssl.keystore.location (a PEM file with the key "
                "and certificate chain), or ssl.keystore.certificate.chain and "
                "ssl.keystore.key",
                key="ssl.keystore.location",
                value=None,
            )
    except FileNotFoundError:
        raise ConfigError(
            f"ssl.keystore.location={location}: no such file",
            key="ssl.keystore.location",
            value=location,
            path=location,
        ) from None
    except ssl.SSLError as exc:
        raise ConfigError(
            f"cannot load the TLS key store ({location or 'PEM text'}): {exc} "
            f"(wrong ssl.key.password, or not a PEM key and certificate?)",
            key="ssl.keystore.location",
            value=location,
        ) from None
    client_auth = config.get("ssl.client.auth", "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(
            f"ssl.client.auth={client_auth!r}: expected required, requested or none",
            key="ssl.client.auth",
            value=client_auth,
        )
    trust_file, trust_text = config.get("ssl.truststore.location"), config.get("ssl.truststore.certificates")
    _load_trust(ctx, trust_file, trust_text)
    if client_auth != "none" and not (trust_file or trust_text):
        raise ConfigError(
            f"ssl.client.auth={client_auth} needs ssl.truststore.location or "
            f"ssl.truststore.certificates (the CAs of client certificates)",
            key="ssl.client.auth",
            value=client_auth,
        )
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    _set_protocols(ctx, config)
    ciphers = config.get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",")))
        except ssl.SSLError:
            raise ConfigError(
                f"ssl.cipher.suites={ciphers!r}: no cipher OpenSSL knows", key="ssl.cipher.suites", value=ciphers
            ) from None
    return ctx


def client_ssl_context(config: Mapping[str, str]) -> ssl.SSLContext:
    """A client :class:`ssl.SSLContext` from Kafka's ``ssl.*`` keys (PEM), as a broker connects
    to another broker's listener: the peer's certificate is checked against
    ``ssl.truststore.location`` / ``ssl.truststore.certificates`` (required), and its host name
    too unless ``ssl.endpoint.identification.algorithm`` is empty (default ``https``); the key
    store, when given, is this side's certificate (for listeners with ``ssl.client.auth``);
    ``ssl.enabled.protocols`` as for :func:`server_ssl_context`."""
    algorithm = config.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(
            f"ssl.endpoint.identification.algorithm={algorithm!r}: expected https or empty",
            key="ssl.endpoint.identification.algorithm",
            value=algorithm,
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust_file, trust_text = config.get("ssl.truststore.location"), config.get("ssl.truststore.certificates")
    if not (trust_file or trust_text):
        raise ConfigError(
            "a TLS connection to another node needs ssl.truststore.location or ssl.truststore.certificates "
            "(the CAs of the nodes' certificates)",
            key="ssl.truststore.location",
            value=None,
        )
    _load_trust(ctx, trust_file, trust_text)
    ctx.check_hostname = algorithm == "https"
    password = config.get("ssl.key.password") or None
    location = config.get("ssl.keystore.location")
    chain, key_text = config.get("ssl.keystore.certificate.chain"), config.get("ssl.keystore.key")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif chain and key_text:
            _load_pem_text(ctx, chain, key_text, password)
    except (FileNotFoundError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot load the TLS key store ({location or 'PEM text'}): {exc}",
            key="ssl.keystore.location",
            value=location,
        ) from None
    _set_protocols(ctx, config)
    return ctx


def _load_trust(ctx: ssl.SSLContext, trust_file: str | None, trust_text: str | None) -> None:
    """Load the CAs of ``ssl.truststore.location`` (a PEM file) and/or
    ``ssl.truststore.certificates`` (PEM text) into ``ctx``."""
    try:
        if trust_file:
            ctx.load_verify_locations(cafile=trust_file)
        if trust_text:
            ctx.load_verify_locations(cadata=trust_text)
    except (FileNotFoundError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot load the trust store ({trust_file or 'PEM text'}): {exc}",
            key="ssl.truststore.location",
            value=trust_file,
        ) from None


def _set_protocols(ctx: ssl.SSLContext, config: Mapping[str, str]) -> None:
    """Bound ``ctx``'s TLS versions by ``ssl.enabled.protocols`` (TLSv1.2 and/or TLSv1.3)."""
    protocols = [p.strip() for p in config.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    bad = [p for p in protocols if p not in _TLS_VERSIONS]
    if bad or not protocols:
        raise ConfigError(
            f"ssl.enabled.protocols: {bad[0] if bad else 'empty'} (TLSv1.2 and/or TLSv1.3)",
            key="ssl.enabled.protocols",
            value=config.get("ssl.enabled.protocols"),
        )
    versions = sorted(_TLS_VERSIONS[p] for p in protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


class ScramClient:
    """The client side of SCRAM (RFC 5802; SHA-256 as RFC 7677, or SHA-512): the password never
    crosses the wire, and the server proves it knows it too. ``first()`` is the client-first
    message, ``final(server_first)`` the client-final one, ``verify(server_final)`` checks the
    server's signature; a message that does not continue the exchange, or a wrong signature,
    raises :class:`ValueError` saying which."""

    def __init__(self, user: str, password: str, algorithm: str = "sha256") -> None:
        self.algorithm = algorithm
        self.password = password.encode()
        name = user.replace("=", "=3D").replace(",", "=2C")
        self.nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        self.bare = f"n={name},r={self.nonce}"
        self.auth_message = b""
        self.server_key = b""

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode(errors="replace")
        attrs = dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self.nonce) or not salt or not iterations.isdigit() or int(iterations) < 4096:
            raise ValueError(f"a SCRAM server-first message that does not continue this exchange: {text!r}")
        salted = hashlib.pbkdf2_hmac(self.algorithm, self.password, base64.b64decode(salt), int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self.algorithm)
        self.server_key = hmac.digest(salted, b"Server Key", self.algorithm)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        self.auth_message = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(self.algorithm, client_key).digest(), self.auth_message, self.algorithm)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = hmac.digest(self.server_key, self.auth_message, self.algorithm)
        text = server_final.decode(errors="replace")
        if not text.startswith("v=") or not hmac.compare_digest(text[2:].encode(), base64.b64encode(expected)):
            raise ValueError("the server's SCRAM signature is wrong: it does not know the password")


def _load_pem_text(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """Load a certificate chain and key given as PEM text (Python's ssl reads files only): through
    a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="seglog-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


# -- broker properties --------------------------------------------------------------------------

#: Keys this module reads from a broker properties file (besides ``ssl.*`` and the
#: ``listener.name.<listener>.`` forms).
SECURITY_KEYS = ("listener.security.protocol.map", "sasl.enabled.mechanisms", "sasl.users.file", "sasl.jaas.config")


def sasl_mechanism_list(mechanisms: str | Iterable[str] | None) -> list[str]:
    """``sasl.enabled.mechanisms`` (comma-separated, or a list) as upper-case names; empty or
    None: every mechanism served. A mechanism not served is a :class:`ConfigError` naming it."""
    if isinstance(mechanisms, str):
        mechanisms = mechanisms.split(",")
    mechs = [m.strip().upper() for m in (mechanisms or SASL_MECHANISMS) if m.strip()]
    bad = [m for m in mechs if m not in SASL_MECHANISMS]
    if bad:
        raise ConfigError(
            f"sasl.enabled.mechanisms: {bad[0]!r} is not served (served: {', '.join(SASL_MECHANISMS)})",
            key="sasl.enabled.mechanisms",
            value=bad[0],
        )
    return mechs


def is_security_key(key: str) -> bool:
    """Whether a broker key belongs to listener security (read here, not by BrokerConfig)."""
    return key.startswith(("ssl.", "sasl.", "listener.name.")) or key in SECURITY_KEYS


def listener_options(listener: str, props: Mapping[str, str]) -> tuple[str, str, int, dict[str, Any]]:
    """Parse one ``listeners`` entry (``NAME://host:port``) and the security keys of a broker
    properties file: returns ``(listener name, host, port, options)`` where ``options`` are the
    keyword arguments of :class:`ListenerSecurity` / ``Store.serve``.

    Keys: ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``; the four protocol names
    map to themselves), ``sasl.enabled.mechanisms``, ``ssl.*``, each also as
    ``listener.name.<name>.<key>`` (lower-case name), which wins; users from
    ``listener.name.<name>.plain.sasl.jaas.config`` (Kafka's ``PlainLoginModule`` with
    ``user_<name>="<password>"`` entries) and/or ``sasl.users.file`` (see
    :func:`read_users_file`)."""
    name, sep, address = listener.partition("://")
    if not sep:
        name, address = "PLAINTEXT", listener
    name = name.strip().upper()
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(
            f"listener {listener!r}: expected HOST:PORT or NAME://HOST:PORT (port 0-65535)",
            key="listeners",
            value=listener,
        )
    host = host.strip("[]")
    protocols = {p: p for p in SECURITY_PROTOCOLS}
    for item in (props.get("listener.security.protocol.map") or "").split(","):
        if not item.strip():
            continue
        lname, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map entry {item!r}: expected "
                f"NAME:PROTOCOL, PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}",
                key="listener.security.protocol.map",
                value=item,
            )
        protocols[lname.strip().upper()] = proto.strip().upper()
    if name not in protocols:
        raise ConfigError(
            f"listener {listener!r}: {name} is not a security protocol and not in listener.security.protocol.map",
            key="listeners",
            value=listener,
        )
    protocol = protocols[name]
    prefix = f"listener.name.{name.lower()}."
    scoped = {k: v for k, v in props.items() if not k.startswith("listener.name.")}
    scoped.update({k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)})
    options: dict[str, Any] = {"security_protocol": protocol}
    ssl_keys = {k: v for k, v in scoped.items() if k.startswith("ssl.")}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = server_ssl_context(ssl_keys)
    if protocol.startswith("SASL_"):
        options["sasl_mechanisms"] = sasl_mechanism_list(scoped.get("sasl.enabled.mechanisms") or None)
        users: dict[str, Any] = {}
        jaas = scoped.get("plain.sasl.jaas.config")
        if jaas:
            users.update(_jaas_users(jaas))
        users_file = scoped.get("sasl.users.file")
        if users_file:
            for user, entry in read_users_file(users_file).items():
                if user in users and entry.password is None:
                    entry = _FileUser(users[user], entry.creds)
                users[user] = entry
        options["users"] = users
    unknown = [
        k
        for k in scoped
        if (k.startswith("sasl.") or k.endswith(".sasl.jaas.config"))
        and k not in ("sasl.enabled.mechanisms", "sasl.users.file", "plain.sasl.jaas.config")
    ]
    if unknown:
        raise ConfigError(
            f"unsupported SASL key {unknown[0]!r} (served: sasl.enabled.mechanisms, "
            f"sasl.users.file, listener.name.<listener>.plain.sasl.jaas.config)",
            key=unknown[0],
            value=scoped[unknown[0]],
        )
    return name, host, int(port_text), options


_JAAS_ENTRY = re.compile(r'([A-Za-z0-9_.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas_users(text: str) -> dict[str, str]:
    """The ``user_<name>="<password>"`` entries of a ``PlainLoginModule`` JAAS config."""
    head = text.strip().split(None, 2)
    if len(head) < 2 or not head[0].endswith("PlainLoginModule") or head[1] != "required":
        raise ConfigError(
            f"plain.sasl.jaas.config must be 'org.apache.kafka.common.security.plain."
            f'PlainLoginModule required user_NAME="PASSWORD" ...;\', got '
            f"{text[:60]!r}",
            key="plain.sasl.jaas.config",
            value=None,
        )
    users = {}
    for key, value in _JAAS_ENTRY.findall(text):
        if key.startswith("user_"):
            users[key[5:]] = re.sub(r"\\(.)", r"\1", value)
    if not users:
        raise ConfigError(
            'plain.sasl.jaas.config defines no user_NAME="PASSWORD" entries', key="plain.sasl.jaas.config", value=None
        )
    return users
