"""``python -m bench``: every benchmark, one report (see `bench.run`)."""

import sys

from bench.run import main

sys.exit(main())
