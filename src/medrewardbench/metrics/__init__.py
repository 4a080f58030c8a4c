"""Metrics: typed results, runs as arrays, statistics and the report's analysis.

Typed results live in :mod:`.results`, runs as arrays and eval's counts in :mod:`.core`,
statistics in :mod:`.stats`, and the report's analysis in :mod:`.analysis`.
"""
