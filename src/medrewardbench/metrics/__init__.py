"""Metrics: typed results, runs as arrays, statistics and the report's analysis.

Typed results live in :mod:`.results`, runs as arrays and eval's counts in :mod:`.core`,
statistics in :mod:`.stats`, the human ceiling in :mod:`.human` with the stand-in verdict in
:mod:`.alttest`, detectable differences in :mod:`.power`, and the report's analysis in :mod:`.analysis`.
"""
