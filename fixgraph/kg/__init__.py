"""Knowledge graph stage: extraction with provenance, validation, resolution, storage."""
