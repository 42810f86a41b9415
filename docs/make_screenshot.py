"""Regenerate docs/images/widget.png: napari on a 1366x768 laptop screen with the sample,
a result and two of the plugin's docks (Gaussian blur and Make sigma map; each scrolls).

Run under a display or Xvfb:  xvfb-run -a -s "-screen 0 1366x768x24" python docs/make_screenshot.py
"""

from pathlib import Path

import napari
from qtpy.QtWidgets import QApplication

from napari_varblur.app.viewer import open_demo_viewer

viewer = napari.Viewer(title="napari-varblur", show=True)
open_demo_viewer(viewer, run=False)
viewer.window.add_plugin_dock_widget("napari-varblur", "Make sigma map")
viewer.window._qt_window.showNormal()
viewer.window._qt_window.resize(1366, 768)
viewer.layers["varblur cells"].visible = False
for _ in range(20):
    QApplication.processEvents()
viewer.reset_view()
for _ in range(20):
    QApplication.processEvents()
out = Path(__file__).parent / "images" / "widget.png"
viewer.screenshot(str(out), canvas_only=False)
print(f"wrote {out}")
viewer.close()
