"""Metrics: typed results (:mod:`.results`), runs as arrays and eval's counts (:mod:`.core`),
statistics (:mod:`.stats`), and the report's analysis (:mod:`.analysis`)."""
