"""Alembic revision files."""
