"""``python -m auxspec.checks.crosshair`` (``make verify``'s first step); see ``cli``."""

import sys

from auxspec.checks.crosshair.cli import main

sys.exit(main())
