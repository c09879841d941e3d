"""``python -m vhd`` runs the command line."""

import sys

from vhd.cli.main import main

sys.exit(main())
