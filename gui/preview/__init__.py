"""Live preview: debounce controller and thread-pool worker."""

from __future__ import annotations

from .controller import PREVIEW_DEBOUNCE_MS, PreviewController, PreviewOutcome

__all__ = ["PREVIEW_DEBOUNCE_MS", "PreviewController", "PreviewOutcome"]
