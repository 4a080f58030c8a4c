"""Alembic migrations of the annotation database (run by :func:`medrewardbench.annotate.db.migrate`)."""
