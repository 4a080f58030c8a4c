"""Migration scripts, oldest first (``r0001_...``); Alembic skips this file."""
