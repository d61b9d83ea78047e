"""Training of the project's own models (the `trainer` Hydra group): data derived from the corpus only."""
