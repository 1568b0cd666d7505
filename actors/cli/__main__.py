"""``python -m actors.cli``: the same as the ``actors`` command."""

import sys

from actors.cli import main

sys.exit(main())
