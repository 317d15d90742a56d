"""Small reads the surfaces make of one repository's store (is there such a run, which packets it holds), beside
the use cases ``service.AuditService`` puts together."""

from __future__ import annotations

from collections.abc import Sequence

from audit_mcp.usecases.workspace import Workspace


class SurfaceReads(Workspace):
    """Reads of the store that answer a surface's question before it calls a use case."""

    def has_run(self, run_id: str) -> bool:
        with self.store_if_any() as tx:
            return tx is not None and tx.run(run_id, plan=False) is not None

    def packet_ids(self, run_id: str) -> set[str]:
        with self.store.read() as tx:
            return {p.packet_id for p in tx.packets(run_id)}

    def known_packets(self, packet_ids: Sequence[str]) -> list[str]:
        """Those of ``packet_ids`` that a run of this audit's store holds, in the order given."""
        with self.store_if_any() as tx:
            return [p for p in packet_ids if tx is not None and tx.packet(p) is not None]

    def submitted_packets(self, run_id: str) -> set[str]:
        with self.store_if_any() as tx:
            return set(tx.submitted_packet_ids(run_id)) if tx is not None else set()
