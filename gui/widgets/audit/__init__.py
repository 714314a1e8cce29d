"""The Audit inspector's parts: table models (:mod:`.models`) and the facts panel (:mod:`.facts`).

The tab that puts them together is :class:`gui.widgets.audit_inspector.AuditTab`; the
comparison with the preview is the engine's (:mod:`engine.audit_compare`).
"""
