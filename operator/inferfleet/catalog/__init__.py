"""Hardware and model-architecture catalogs, HF config.json parsing (pure)."""
