"""``python -m napari_varblur demo``."""

import sys

from .cli import main

sys.exit(main())
