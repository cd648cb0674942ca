"""`python -m pytest_rvtune.cli`: the `rvtune` command without the console script."""

import sys

from pytest_rvtune.cli import main

sys.exit(main())
