"""Test helpers that are real parts, not mocks.

A local OpenAI-compatible HTTP server (:mod:`medrewardbench.testing.openai_server`) with injectable
latency and faults, used by the test suite and the benchmarks. Importing it needs the ``serve`` extra
(FastAPI and uvicorn).
"""
