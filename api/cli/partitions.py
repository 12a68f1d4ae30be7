"""CLI: `crossroads db partition-chunks [--undo]`, chunks partitioned by tenant (vector/partitions.py).
Registered on the `db` group by api/cli/main.py, where that group lives."""
from __future__ import annotations

import typer

from api.cli.common import JsonOption, database, fail, out, print_json
from core.settings import get_settings


def partition_chunks(
    undo: bool = typer.Option(False, "--undo", metavar="", help="Back to one table with per-tenant partial HNSW "
                              "graphs (the default layout)."),
    json_out: bool = JsonOption,
) -> None:
    """Partition chunks by tenant (a partition and HNSW graph per tenant); run again to give tenants added
    since their own partitions. Copies the table under a lock: run it in a maintenance window."""
    from dataclasses import asdict

    from vector import hnsw_index
    from vector.partitions import PartitionError, layout, partition, unpartition

    settings = get_settings()
    with database(settings) as db:
        try:
            with db.connection() as conn:
                report = unpartition(conn) if undo else partition(conn)
        except PartitionError as exc:
            fail(exc)
        # the tenants' own graphs again, built concurrently: searches use the shared graphs meanwhile
        rebuilt = hnsw_index.ensure_tenants(db, settings.tenant_vector_index_min_rows) if undo else []
        with db.connection() as conn:
            now = layout(conn)
    result = asdict(report) | {"tenant_graphs_built": [r for r in rebuilt if r["built"]], "layout": now}
    if json_out:
        print_json(result)
        return
    what = {"partitioned": "chunks is now partitioned by tenant", "split": "tenants moved out of the default partition",
            "unpartitioned": "chunks is one table again"}[report.direction]
    out.print(f"{what}: {report.chunks} chunks copied, {len(report.partitions)} tenant partitions created "
              f"({report.seconds:.1f} s)")
    if report.orphan_staged_vectors:
        out.print(f"{report.orphan_staged_vectors} staged vectors of deleted chunks removed")
    if undo:
        out.print(f"{len(result['tenant_graphs_built'])} tenant HNSW graphs rebuilt")
    else:
        out.print("tenants added from now on share the default partition until this command runs again; undo with "
                  "`crossroads db partition-chunks --undo`")
