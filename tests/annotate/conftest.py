"""Fixtures of the annotation app tests (defined in annotate_helpers.py, which the tests also import).

See annotate_helpers.py: a throwaway PostgreSQL cluster, ``db_url`` over SQLite and PostgreSQL,
input files whose ids and metadata name sources and models, and a real server on 127.0.0.1.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from annotate_helpers import cases_file, db_url, gold_file, pg_cluster, project_factory, serve  # noqa: F401
