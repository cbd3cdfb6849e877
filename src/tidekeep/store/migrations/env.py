"""Alembic environment: always run with a connection handed in by tidekeep.store.engine."""

from __future__ import annotations

from alembic import context

from tidekeep.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
