"""``python -m seglog.cli``: the ``seglog`` command."""

import sys

from seglog.cli import main

sys.exit(main())
