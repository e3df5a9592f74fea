"""genui's engine: DiffusionGemma block diffusion behind a small, typed, streaming interface."""
