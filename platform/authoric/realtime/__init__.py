"""The live feed: relay (LISTEN + catch-up by position), read classes, fan-out, SSE streams."""
