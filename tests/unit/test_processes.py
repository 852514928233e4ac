"""``seglog.util.processes``: ending a child that leads its own process group."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from seglog.util.processes import wait_or_kill_group

# A parent that ignores SIGTERM and starts a grandchild in its own group; it prints the
# grandchild's pid and then sleeps.
STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_process_that_exits_in_time_is_only_waited_for() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    wait_or_kill_group(p, 30, 1)
    assert p.returncode == 0


def test_a_process_that_outstays_the_wait_is_killed_with_its_whole_group() -> None:
    p = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, start_new_session=True, text=True)
    assert p.stdout is not None
    grandchild = int(p.stdout.readline())
    p.send_signal(signal.SIGTERM)  # ignored
    started = time.monotonic()
    wait_or_kill_group(p, 0.5, 10)
    assert time.monotonic() - started < 10
    assert p.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)
    p.stdout.close()
