"""Regenerate docs/images/widget.png: napari with the sample, a result and the widget.

Run under a display or Xvfb:  xvfb-run -a -s "-screen 0 1600x1000x24" python docs/make_screenshot.py
"""

from pathlib import Path

import napari
from qtpy.QtWidgets import QApplication

from napari_varblur.gui.viewer import open_demo_viewer

viewer = napari.Viewer(title="napari-varblur", show=True)
viewer.window._qt_window.resize(1400, 850)
open_demo_viewer(viewer, run=False)
viewer.layers["varblur cells"].visible = False
viewer.reset_view()
for _ in range(20):
    QApplication.processEvents()
out = Path(__file__).parent / "images" / "widget.png"
viewer.screenshot(str(out), canvas_only=False)
print(f"wrote {out}")
viewer.close()
