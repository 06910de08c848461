"""SpecScope engine: models, caches, drafting policies and verification (torch only, no UI)."""
