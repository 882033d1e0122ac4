"""Entry point for `python -m codewhale`."""

import sys

from codewhale.cli import main

sys.exit(main())
