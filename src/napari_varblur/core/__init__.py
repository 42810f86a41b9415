"""The contract as code: rules (radius, exponent, limits, tolerances), edge modes,
argument checks and the validated spec, 1-D taps and sigma levels.  NumPy only; no
backend, no adapter."""
