"""The programs around the engine: generate, bench, summarize, tune, train, model card, prompts."""
