"""One transaction's queries: every aggregate's, on one connection.

All of the project's SQL lives in this package, split by aggregate: audits and
their files (``audits``), the code map's edges and entry points (``code_maps``) and its facts cache
(``code_facts``), the coverage matrix (``cells``) and its queue read unit by unit (``queue``), runs,
packets and submissions (``runs``), what a run in flight was scheduled for and the failures reported
while it runs (``inflight``), findings, failures and leads (``findings``), the threat model, verdicts and
runtime evidence (``opinions``), the ledger (``ledger``), requeue requests (``requeues``) and packet claims
(``claims``), forecasts recorded under the queue's generation (``forecasts``), and the repository's history
(``history``). SQL stays portable.
"""

from __future__ import annotations

from audit_mcp.store.audits import AuditQueries
from audit_mcp.store.cells import CellQueries
from audit_mcp.store.claims import ClaimQueries
from audit_mcp.store.code_facts import CodeFactsQueries
from audit_mcp.store.code_maps import CodeMapQueries
from audit_mcp.store.findings import FindingQueries
from audit_mcp.store.forecasts import ForecastQueries
from audit_mcp.store.generation import GenerationQueries
from audit_mcp.store.history import HistoryQueries
from audit_mcp.store.inflight import InflightQueries
from audit_mcp.store.ledger import LedgerQueries
from audit_mcp.store.opinions import OpinionQueries
from audit_mcp.store.queue import QueueQueries
from audit_mcp.store.requeues import RequeueQueries
from audit_mcp.store.runs import RunQueries


class Tx(
    AuditQueries,
    CodeMapQueries,
    CodeFactsQueries,
    CellQueries,
    QueueQueries,
    RunQueries,
    InflightQueries,
    FindingQueries,
    OpinionQueries,
    LedgerQueries,
    RequeueQueries,
    ClaimQueries,
    GenerationQueries,
    ForecastQueries,
    HistoryQueries,
):
    """Typed queries inside one transaction."""
