"""A standalone ZooKeeper server on a free loopback port, with its data in a temporary
directory — for tests, benchmarks and :class:`seglog.cluster.local.LocalCluster`.

>>> from seglog.cluster.zkserver import ZooKeeperServer
>>> with ZooKeeperServer() as zk:                          # doctest: +SKIP
...     print(zk.connect_string)                           # 127.0.0.1:PORT
...     # ... KazooClient(zk.connect_string) ...

The server is the one Debian's ``zookeeper`` package installs (``/usr/share/java/zookeeper.jar``,
whose manifest lists its dependencies), run as ``java -cp ... ZooKeeperServerMain zoo.cfg``.
``SEGLOG_ZOOKEEPER_CLASSPATH`` names another class path; ``SEGLOG_JAVA`` another ``java``.
:func:`unavailable_reason` says why no server can be started (tests skip with it).

Timing: ``tickTime`` is 100 ms and the negotiable session timeout 200 ms .. 60 s (ZooKeeper's
defaults are 2 and 20 ticks of 2 s), so tests can use short sessions and nodes can still ask
for Kafka's 18 s default. The server is started in its own process group and always stopped
(``stop``, the context manager, and an ``atexit`` hook for the forgetful).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self

from seglog.util.ports import free_port
from seglog.util.processes import wait_or_kill_group

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
_EXTRA_JARS = ("/usr/share/java/slf4j-nop.jar",)  # silences SLF4J's missing-binding warning
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

_running: weakref.WeakSet[ZooKeeperServer] = weakref.WeakSet()


def _java() -> str | None:
    return os.environ.get("SEGLOG_JAVA") or shutil.which("java")


def classpath() -> str | None:
    """The server's class path, or None when no ZooKeeper installation is found."""
    cp = os.environ.get("SEGLOG_ZOOKEEPER_CLASSPATH")
    if cp:
        return cp
    if not os.path.exists(DEBIAN_JAR):
        return None
    return os.pathsep.join([DEBIAN_JAR] + [j for j in _EXTRA_JARS if os.path.exists(j)])


def unavailable_reason() -> str | None:
    """None if a server can be started here, else what is missing."""
    if classpath() is None:
        return (
            f"ZooKeeper is not installed ({DEBIAN_JAR} is missing): apt-get install zookeeper, "
            "or set SEGLOG_ZOOKEEPER_CLASSPATH"
        )
    if _java() is None:
        return "no java runtime on PATH (ZooKeeper needs one): apt-get install openjdk-17-jre-headless"
    try:
        import kazoo  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return "the kazoo package is missing: pip install 'seglog[zookeeper]'"
    return None


def four_letter(host: str, port: int, word: bytes, timeout: float = 1.0) -> bytes:
    """Send a four-letter command (``ruok``, ``srvr``) and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word)
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return out
            out += chunk


class ZooKeeperServer:
    """One standalone ZooKeeper server process (see module docs)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: str | None = None,
        tick_time_ms: int = 100,
        min_session_timeout_ms: int = 200,
        max_session_timeout_ms: int = 60_000,
        start_timeout_s: float = 30.0,
    ) -> None:
        self.host = host
        self.port = port
        self._own_dir = data_dir is None
        self.dir = data_dir or tempfile.mkdtemp(prefix="seglog-zookeeper-")
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def log_path(self) -> str:
        return os.path.join(self.dir, "zookeeper.out")

    def start(self) -> Self:
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        if self.process is not None and self.process.poll() is None:
            return self
        if not self.port:
            self.port = free_port(self.host)
        data = os.path.join(self.dir, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(
                f"tickTime={self.tick_time_ms}\n"
                f"dataDir={data}\n"
                f"clientPort={self.port}\n"
                f"clientPortAddress={self.host}\n"
                f"minSessionTimeout={self.min_session_timeout_ms}\n"
                f"maxSessionTimeout={self.max_session_timeout_ms}\n"
                "maxClientCnxns=0\n"
                "admin.enableServer=false\n"
                "4lw.commands.whitelist=ruok,srvr,stat\n"
            )
        java, cp = _java(), classpath()
        assert java is not None and cp is not None
        cmd = [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            cp,
            MAIN_CLASS,
            cfg,
        ]
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        _running.add(self)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.process.poll() is not None:
                tail = self._log_tail()
                self.process = None
                raise RuntimeError(f"ZooKeeper exited with status during start-up; {self.log_path} ends:\n{tail}")
            try:
                if four_letter(self.host, self.port, b"ruok", 0.5) == b"imok":
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(
                    f"ZooKeeper did not answer on {self.connect_string} within "
                    f"{self.start_timeout_s} s; see {self.log_path}"
                )
            time.sleep(0.1)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s); a directory it made is removed."""
        p, self.process = self.process, None
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            wait_or_kill_group(p, 5, 5)
        _running.discard(self)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the server, keeping its data directory and port: :meth:`start` brings it
        back with every persistent znode and the sessions that have not timed out meanwhile."""
        p, self.process = self.process, None
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)

    def pause(self) -> None:
        """SIGSTOP the server (clients see timeouts, then lost connections)."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGCONT)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:
        p = getattr(self, "process", None)
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@atexit.register
def _stop_all() -> None:
    for zk in list(_running):
        zk.stop()
