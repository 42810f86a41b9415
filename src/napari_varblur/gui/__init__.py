"""napari adapter: layers in, layers out (:mod:`.layers`) and dock widgets (:mod:`.widgets`).

The only part of the package that imports napari and Qt.
"""
