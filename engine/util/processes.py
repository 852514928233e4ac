"""Ending a child process that leads its own process group (``start_new_session=True``)."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def wait_or_kill_group(process: subprocess.Popen[Any], timeout_s: float, kill_wait_s: float) -> None:
    """Wait up to ``timeout_s`` for ``process`` to exit; if it has not, SIGKILL its whole process
    group (the child and anything it started) and wait up to ``kill_wait_s`` more.

    A group that is already gone is not an error; ``subprocess.TimeoutExpired`` escapes only when
    the process outlives the SIGKILL wait too."""
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(kill_wait_s)
