"""The ``seglog`` command's entry point (``[project.scripts]``).

A top-level module of its own, so that it runs before the ``seglog`` package is imported: Ctrl-C
while the package loads (a few tenths of a second, native modules included) then ends the
command the way Ctrl-C does at any later point in :func:`seglog.cli.main` — one line on stderr
and exit status 130 — instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from seglog.cli import main as cli_main

        return cli_main(argv)
    except KeyboardInterrupt:
        # Interrupted before (or while) seglog.cli parsed the command line: name the command as
        # seglog.cli would.
        args = list(sys.argv[1:] if argv is None else argv)
        command = next((a for a in args if not a.startswith("-")), None)
        sys.stderr.write(f"seglog{' ' + command if command else ''}: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
