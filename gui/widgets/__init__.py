"""Panels of the main window."""
