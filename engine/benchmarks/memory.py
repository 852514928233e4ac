"""Peak resident memory of the benchmark process around one timed call (Linux).

:func:`start` resets the kernel's high-water mark of the process's resident set (``5`` into
``/proc/self/clear_refs``) and returns the resident set then; :func:`peak` reads the high-water
mark since. Their difference is what one contender's run added at its peak — every page it
touched, anonymous or mapped from a file (a reader that maps its whole file counts it), not the
page cache the kernel keeps for files read or written. Elsewhere both return None.
"""

from __future__ import annotations


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def start() -> int | None:
    """Reset the peak resident set to the current one; that current size in bytes, or None
    where the kernel does not offer it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _status_kib("VmRSS:")


def peak() -> int | None:
    """The peak resident set in bytes since :func:`start`, or None."""
    return _status_kib("VmHWM:")
