"""One module per use case, over one ``Workspace``, behind the ``AuditService`` facade.

``next_step`` runs the obligation loop (``starting`` for intake and planning,
``dispatching`` for a run, ``merging`` for ingest, ``reporting`` for the report,
``page`` for what the audit page shows beyond it)
and hands the host one Step (``stepping``); ``submission`` checks and records a
packet's results; ``quota`` and ``status`` are the read-only views; ``rates``
holds the limits, cooldowns and learning the others share. ``service`` is the
thin facade the surfaces call.

May import: ``engine``, ``findings``, ``scheduling``, ``store``, ``core``.
Never ``surfaces``.
"""
