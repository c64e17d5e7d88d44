"""``python -m profkit.demo`` / ``profkit run -m profkit.demo``: run the demo program."""

import sys

from profkit.demo import main

sys.exit(main())
