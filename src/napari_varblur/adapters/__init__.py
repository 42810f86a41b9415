"""The ways in: the NumPy/dask API, the JAX-native API, the request helpers the CLI and
napari share, file I/O and the command line.  Each validates with the core's normalisers
and hands the spec to the engine."""
