"""``python -m fxtr.cli`` runs the ``fxtr`` command."""

import sys

from fxtr.cli import main

sys.exit(main())
