"""Alembic migrations of the library (package so that setuptools ships them)."""
