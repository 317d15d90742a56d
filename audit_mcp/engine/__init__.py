"""The audit's deterministic engine: pure where it can be, storage only through ``store``.

Intake (``intake``, ``ignores``, ``languages``, ``incremental``), lenses (``lenses``), the
coverage matrix (``coverage``), packing (``packets``, ``batching``), packet
and step prompts (``packet_prompts``, ``steps``, ``templates``), the dispatch
plan document (``dispatch``), the obligation planner (``planner``), validation
of submissions (``inputs``, the models that also publish the tools' input
schemas; ``validation``, ``checks``), folding a run into the matrix
(``ingest``), files that changed under review (``drift``) and host
capabilities (``hosts``).

May import: ``store``, ``core``. Never ``findings``, ``scheduling``,
``usecases`` or ``surfaces``: the use cases compose them.
"""
