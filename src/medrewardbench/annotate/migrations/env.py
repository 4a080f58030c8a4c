"""Alembic environment: migrates the connection that :func:`medrewardbench.annotate.db.migrate` hands in.

With ``alembic -x url=...`` on the command line (offline SQL generation, or a database given by
URL), the URL is used instead.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from medrewardbench.annotate.db import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: call medrewardbench.annotate.db.migrate, or pass -x url=...")
    return url


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url())
    try:
        with engine.begin() as own:
            context.configure(connection=own, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
