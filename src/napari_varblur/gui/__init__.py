"""napari adapter: layers in, layers out (:mod:`.layers`) and dock widgets (:mod:`.widgets`).

The only part of the package that imports napari and Qt.
"""

import os

# napari imports this package (through napari.yaml's ``napari_varblur.gui.widgets``)
# before anything here imports JAX.  Listing the backends starts JAX, which by default
# reserves most of a GPU's memory up front: too greedy inside an interactive viewer that
# shares the GPU.  A user's own choice of either setting is left alone.
if not {"XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION"} & set(os.environ):
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
