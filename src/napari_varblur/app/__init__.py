"""The top layer: the ``varblur`` command line and what ties the GUI and the library
together (``varblur demo --view``)."""
