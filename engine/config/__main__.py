"""``python -m seglog.config``: print the configuration reference (``docs/configuration.md``)."""

import sys

from seglog.config import configuration_markdown

sys.stdout.write(configuration_markdown())
