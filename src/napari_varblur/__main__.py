"""``python -m napari_varblur demo``."""

import sys

from .adapters.cli import main

sys.exit(main())
