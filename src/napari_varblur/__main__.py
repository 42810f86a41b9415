"""``python -m napari_varblur demo``."""

import sys

from .app.cli import main

sys.exit(main())
