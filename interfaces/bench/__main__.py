"""`python -m interfaces.bench`: the same as `paywarden-bench`."""

import sys

from interfaces.bench.main import main

sys.exit(main())
