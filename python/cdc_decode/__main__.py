"""``python -m cdc_decode``: the same as the ``cdc-decode`` command."""

import sys

from .cli import main

sys.exit(main())
