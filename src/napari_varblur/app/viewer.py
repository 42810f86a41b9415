"""``varblur demo --view``: napari with the sample loaded and the blur widget docked."""

from __future__ import annotations

import napari
from qtpy.QtWidgets import QApplication

from ..gui.layers import blur_layer


def open_demo_viewer(viewer: napari.Viewer | None = None, *, run: bool = True):
    """Open (or fill) a viewer with the defocus sample, its result and the widget.

    Returns the viewer and the docked "Gaussian blur" widget.
    """
    viewer = viewer or napari.Viewer(title="napari-varblur demo")
    viewer.open_sample("napari-varblur", "defocus")
    cells, sigma_map = viewer.layers["varblur cells"], viewer.layers["varblur sigma map"]
    _, widget = viewer.window.add_plugin_dock_widget("napari-varblur", "Gaussian blur")
    widget.image.value = cells  # the sample's map is tagged: the widget preselects it
    widget.sigma.value = "1.0"
    blur_layer(cells, 1.0, sigma_map, viewer=viewer)
    # The dock narrows the canvas: fit the image to what is left of it once Qt has laid
    # the window out again (else its left and right edges are cut off).
    QApplication.processEvents()
    viewer.reset_view()
    if run:
        napari.run()
    return viewer, widget
