"""Serving: the FastAPI service (`fixgraph serve`) and its dashboard, on the benchmark's own System."""
