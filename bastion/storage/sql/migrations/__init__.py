"""Alembic migrations of bastion's SQL schema, run by :mod:`storage.sql.migrate`."""
