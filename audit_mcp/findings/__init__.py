"""What reviews produce, and how it is told: synthesis, reports, SARIF, comparison, analyzer leads.

``synthesis`` deduplicates findings, fingerprints them and groups them into
work blocks; ``report`` renders Markdown and JSON; ``page_data`` and ``page`` draw
the audit as one self-contained HTML page; ``sarif`` renders SARIF
2.1.0, with GitHub's line hash (``line_hash``) and evidence columns
(``regions``); ``comparison`` matches an audit against the previous one; ``leads``
imports static-analyzer alerts as leads and ``analyzers`` runs the
analyzers a config names.

May import: ``store``, ``core``. Never ``engine``, ``scheduling``,
``usecases`` or ``surfaces``.
"""
