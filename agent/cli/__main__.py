"""``python -m agent.cli`` runs the ``fabula`` command (used where the script is not on PATH)."""

import sys

from agent.cli import main

sys.exit(main())
