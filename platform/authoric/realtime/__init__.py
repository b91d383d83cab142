"""The live feed's transport: the Source seam, read classes, judging, fan-out, SSE streams."""
