"""All SQL of the entity graph: access levels, extraction cache, graph tables, communities, reports."""
from __future__ import annotations

from dataclasses import asdict
from typing import NamedTuple

import psycopg
from psycopg.types.json import Jsonb

from graph.types import Community
from graph.levels import DEFAULT_LEVEL, AccessLevel
from graph.types import (
    ChunkInput, Extraction, ExtractedClaim, ExtractedEntity, ExtractedRelationship, GraphEntity, GraphRelationship,
)

# --- access levels -------------------------------------------------------------------------------


def set_level(conn: psycopg.Connection, tenant: str, name: str, groups: list[str] | None) -> None:
    conn.execute(
        "INSERT INTO access_levels (tenant_id, name, groups) VALUES (%s, %s, %s)"
        " ON CONFLICT (tenant_id, name) DO UPDATE SET groups = EXCLUDED.groups, updated_at = now()",
        (tenant, name, groups),
    )


def delete_level(conn: psycopg.Connection, tenant: str, name: str) -> bool:
    with conn.transaction():
        found = conn.execute("DELETE FROM access_levels WHERE tenant_id = %s AND name = %s", (tenant, name)).rowcount
        clear_level_graph(conn, tenant, name)
    return bool(found)


def clear_level_graph(conn: psycopg.Connection, tenant: str, level: str) -> None:
    """Remove a level's whole graph (entities, relationships, communities, reports) in one transaction:
    for a deleted level, and for a level left without a readable chunk, whose rows are all withdrawn."""
    with conn.transaction():
        for table in ("graph_entities", "graph_relationships", "graph_communities", "community_reports"):
            conn.execute(f"DELETE FROM {table} WHERE tenant_id = %s AND access_level = %s", (tenant, level))


def list_levels(conn: psycopg.Connection, tenant: str) -> list[AccessLevel]:
    """Defined levels plus the implicit `all`, with groups resolved and chunks counted."""
    tenant_groups = [r[0] for r in conn.execute(
        "SELECT DISTINCT g FROM chunks, unnest(acl) AS g WHERE tenant_id = %s ORDER BY g", (tenant,)
    )]
    defined = dict(conn.execute(
        "SELECT name, groups FROM access_levels WHERE tenant_id = %s ORDER BY name", (tenant,)
    ).fetchall())
    defined.setdefault(DEFAULT_LEVEL, None)
    levels = []
    for name in sorted(defined):
        groups = tuple(sorted(defined[name] if defined[name] is not None else tenant_groups))
        count = conn.execute(
            "SELECT count(*) FROM chunks WHERE tenant_id = %s AND acl && %s", (tenant, list(groups))
        ).fetchone()[0] if groups else 0
        levels.append(AccessLevel(name, groups, count))
    return levels


def level_chunks(conn: psycopg.Connection, tenant: str, groups: tuple[str, ...]) -> list[ChunkInput]:
    """Every chunk the level's graph may use: its ACL overlaps the level's groups."""
    rows = conn.execute(
        """
        SELECT c.id, c.doc_id, d.title, c.heading, c.content, c.lang, c.content_hash
        FROM chunks c JOIN documents d ON d.tenant_id = c.tenant_id AND d.doc_id = c.doc_id
        WHERE c.tenant_id = %s AND c.acl && %s ORDER BY c.id
        """,
        (tenant, list(groups)),
    ).fetchall()
    return [ChunkInput(*r) for r in rows]


# --- extraction cache ----------------------------------------------------------------------------


def _extraction_from_json(data: dict, errors: list[str]) -> Extraction:
    return Extraction(
        entities=tuple(ExtractedEntity(**e) for e in data.get("entities", [])),
        relationships=tuple(ExtractedRelationship(**r) for r in data.get("relationships", [])),
        claims=tuple(ExtractedClaim(**c) for c in data.get("claims", [])),
        errors=tuple(errors),
    )


def cached_extractions(
    conn: psycopg.Connection, hashes: list[str], extractor: str, version: str, model: str
) -> dict[str, Extraction]:
    """Successful extractions only: a row with errors (written before failures stopped being saved)
    is no result, so its chunk is extracted again."""
    rows = conn.execute(
        "SELECT content_hash, result, errors FROM extraction_cache"
        " WHERE content_hash = ANY(%s) AND extractor = %s AND version = %s AND model = %s AND errors = '{}'",
        (hashes, extractor, version, model),
    ).fetchall()
    return {h: _extraction_from_json(result, errors) for h, result, errors in rows}


def save_extraction(
    conn: psycopg.Connection, content_hash: str, extractor: str, version: str, model: str, extraction: Extraction
) -> None:
    """Cache a successful extraction. A failed one is refused here: caching it would make every later
    build skip the chunk, its entities silently lost."""
    if extraction.errors:
        raise ValueError("a failed extraction is not a result and must not be cached")
    result = {
        "entities": [asdict(e) for e in extraction.entities],
        "relationships": [asdict(r) for r in extraction.relationships],
        "claims": [asdict(c) for c in extraction.claims],
    }
    # A failure row left by an older version is replaced; a good row is never overwritten.
    conn.execute(
        "INSERT INTO extraction_cache (content_hash, extractor, version, model, result, errors)"
        " VALUES (%s, %s, %s, %s, %s, '{}')"
        " ON CONFLICT (content_hash, extractor, version, model) DO UPDATE"
        " SET result = EXCLUDED.result, errors = '{}', created_at = now() WHERE extraction_cache.errors <> '{}'",
        (content_hash, extractor, version, model, Jsonb(result)),
    )


def cached_summaries(
    conn: psycopg.Connection, hashes: list[str], summarizer: str, version: str, model: str
) -> dict[str, str]:
    """Entity description summaries share the extraction cache: content_hash = graph.indexing.summarize.summary_hash."""
    rows = conn.execute(
        "SELECT content_hash, result->>'summary' FROM extraction_cache"
        " WHERE content_hash = ANY(%s) AND extractor = %s AND version = %s AND model = %s",
        (hashes, summarizer, version, model),
    ).fetchall()
    return {h: text for h, text in rows if text}


def save_summary(conn: psycopg.Connection, content_hash: str, summarizer: str, version: str, model: str,
                 summary: str) -> None:
    conn.execute(
        "INSERT INTO extraction_cache (content_hash, extractor, version, model, result)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (content_hash, summarizer, version, model, Jsonb({"summary": summary})),
    )


# --- entities and relationships ------------------------------------------------------------------


def replace_graph(
    conn: psycopg.Connection, tenant: str, level: str, entities: list[GraphEntity], relationships: list[GraphRelationship]
) -> None:
    """Swap a level's entities and relationships in one transaction (readers see old or new, never half).
    Rows citing a chunk the level no longer reads (changed since the build read it) are withdrawn
    before the swap is seen."""
    with conn.transaction():
        conn.execute("SELECT lock_graph_sources(%s, true)", (tenant,))
        conn.execute("DELETE FROM graph_entities WHERE tenant_id = %s AND access_level = %s", (tenant, level))
        conn.execute("DELETE FROM graph_relationships WHERE tenant_id = %s AND access_level = %s", (tenant, level))
        with conn.cursor() as cur:
            with cur.copy("COPY graph_entities (tenant_id, access_level, key, name, type, description, degree, chunk_ids)"
                          " FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text", "text", "text", "text", "text", "text", "int4", "int8[]"])
                for e in entities:
                    copy.write_row((tenant, level, e.key, e.name, e.type, e.description, e.degree, list(e.chunk_ids)))
            with cur.copy("COPY graph_relationships (tenant_id, access_level, source_key, target_key, description,"
                          " weight, chunk_ids) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text", "text", "text", "text", "text", "float4", "int8[]"])
                for r in relationships:
                    copy.write_row((tenant, level, r.source_key, r.target_key, r.description, r.weight, list(r.chunk_ids)))
        cited = sorted({c for e in entities for c in e.chunk_ids} | {c for r in relationships for c in r.chunk_ids})
        conn.execute("SELECT withdraw_unreadable_graph_text(%s, %s, %s::bigint[])", (tenant, level, cited))


def _served(conn: psycopg.Connection, tenant: str, level: str, columns: str, table: str, order: str) -> list[tuple]:
    """The level's served rows of a graph table (withdrawn ones are not)."""
    return conn.execute(
        f"SELECT {columns} FROM {table} WHERE tenant_id = %s AND access_level = %s AND withdrawn_at IS NULL"
        f" ORDER BY {order}", (tenant, level)).fetchall()


def load_entities(conn: psycopg.Connection, tenant: str, level: str) -> list[GraphEntity]:
    rows = _served(conn, tenant, level, "key, name, type, description, chunk_ids, degree", "graph_entities", "key")
    return [GraphEntity(r[0], r[1], r[2], r[3], tuple(r[4]), r[5]) for r in rows]


def load_relationships(conn: psycopg.Connection, tenant: str, level: str) -> list[GraphRelationship]:
    rows = _served(conn, tenant, level, "source_key, target_key, description, weight, chunk_ids",
                   "graph_relationships", "source_key, target_key")
    return [GraphRelationship(r[0], r[1], r[2], r[3], tuple(r[4])) for r in rows]


# --- communities and reports ---------------------------------------------------------------------


def load_communities(conn: psycopg.Connection, tenant: str, level: str) -> list[Community]:
    rows = conn.execute(
        "SELECT community_id, level, parent, members FROM graph_communities"
        " WHERE tenant_id = %s AND access_level = %s ORDER BY level, community_id",
        (tenant, level),
    ).fetchall()
    children: dict[int, list[int]] = {}
    for cid, _, parent, _ in rows:
        if parent is not None:
            children.setdefault(parent, []).append(cid)
    return [Community(cid, lvl, parent, tuple(members), tuple(sorted(children.get(cid, ()))))
            for cid, lvl, parent, members in rows]


def replace_communities(conn: psycopg.Connection, tenant: str, level: str, communities: list[Community], hashes: dict[int, str]) -> None:
    with conn.transaction():
        conn.execute("DELETE FROM graph_communities WHERE tenant_id = %s AND access_level = %s", (tenant, level))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO graph_communities (tenant_id, access_level, community_id, level, parent, members, membership_hash)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(tenant, level, c.id, c.level, c.parent, list(c.members), hashes[c.id]) for c in communities],
            )
        conn.execute(
            "DELETE FROM community_reports WHERE tenant_id = %s AND access_level = %s AND NOT community_id = ANY(%s)",
            (tenant, level, [c.id for c in communities]),
        )


class StoredReportInputs(NamedTuple):
    input_hash: str
    model: str
    input_chunk_ids: tuple[int, ...]


def report_input_hashes(conn: psycopg.Connection, tenant: str, level: str) -> dict[int, StoredReportInputs]:
    """community id -> what the served report was written from. A withdrawn report is left out, so the
    next build writes it anew from readable inputs instead of serving it again."""
    rows = conn.execute(
        "SELECT community_id, input_hash, model, input_chunk_ids FROM community_reports"
        " WHERE tenant_id = %s AND access_level = %s AND withdrawn_at IS NULL",
        (tenant, level),
    ).fetchall()
    return {cid: StoredReportInputs(h, m, tuple(ids)) for cid, h, m, ids in rows}


def upsert_report(conn: psycopg.Connection, tenant: str, level: str, community_id: int, report: dict, input_hash: str,
                  model: str, input_chunk_ids: list[int]) -> None:
    """Store a report written now, served (again); `input_chunk_ids`: every chunk behind its inputs.
    Withdrawn at once if one of them changed since the build read it."""
    with conn.transaction():
        conn.execute("SELECT lock_graph_sources(%s, true)", (tenant,))
        conn.execute(
            """
            INSERT INTO community_reports (tenant_id, access_level, community_id, title, summary, rating,
                rating_explanation, findings, source_chunk_ids, input_hash, model, input_chunk_ids)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (tenant_id, access_level, community_id) DO UPDATE SET
                title = EXCLUDED.title, summary = EXCLUDED.summary, rating = EXCLUDED.rating,
                rating_explanation = EXCLUDED.rating_explanation, findings = EXCLUDED.findings,
                source_chunk_ids = EXCLUDED.source_chunk_ids, input_hash = EXCLUDED.input_hash,
                model = EXCLUDED.model, generated_at = now(), embedding = NULL, embed_model = NULL,
                input_chunk_ids = EXCLUDED.input_chunk_ids, withdrawn_at = NULL
            """,
            (tenant, level, community_id, report["title"], report["summary"], report["rating"],
             report.get("rating_explanation", ""), Jsonb(report["findings"]), list(report["source_chunk_ids"]),
             input_hash, model, list(input_chunk_ids)),
        )
        conn.execute("SELECT withdraw_unreadable_graph_text(%s, %s, %s::bigint[])", (tenant, level, list(input_chunk_ids)))


def save_report_embeddings(conn: psycopg.Connection, tenant: str, level: str, model: str, vectors: dict[int, object]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "UPDATE community_reports SET embedding = %s, embed_model = %s"
            " WHERE tenant_id = %s AND access_level = %s AND community_id = %s",
            [(v, model, tenant, level, cid) for cid, v in sorted(vectors.items())],
        )


def reports_missing_embedding(conn: psycopg.Connection, tenant: str, level: str, model: str) -> list[tuple[int, str]]:
    return conn.execute(
        "SELECT community_id, title || '. ' || summary FROM community_reports"
        " WHERE tenant_id = %s AND access_level = %s AND embed_model IS DISTINCT FROM %s AND withdrawn_at IS NULL"
        " ORDER BY community_id",
        (tenant, level, model),
    ).fetchall()


def documents_of_chunks(conn: psycopg.Connection, tenant: str, chunk_ids: list[int]) -> dict[int, tuple[str, str]]:
    """chunk id -> (doc id, title), for listing the documents behind a report."""
    rows = conn.execute(
        "SELECT c.id, c.doc_id, d.title FROM chunks c JOIN documents d ON d.tenant_id = c.tenant_id AND d.doc_id = c.doc_id"
        " WHERE c.tenant_id = %s AND c.id = ANY(%s)",
        (tenant, chunk_ids),
    ).fetchall()
    return {cid: (doc, title) for cid, doc, title in rows}


def list_reports(conn: psycopg.Connection, tenant: str, level: str, community_id: int | None = None) -> list[dict]:
    """The level's served reports with their communities (or only `community_id`'s)."""
    rows = conn.execute(
        """
        SELECT r.community_id, c.level, c.parent, r.title, r.summary, r.rating, r.rating_explanation,
               r.findings, r.source_chunk_ids, r.model, c.members, r.embedding, r.embed_model
        FROM community_reports r JOIN graph_communities c
          ON c.tenant_id = r.tenant_id AND c.access_level = r.access_level AND c.community_id = r.community_id
        WHERE r.tenant_id = %s AND r.access_level = %s AND (%s::int IS NULL OR r.community_id = %s::int)
          AND r.withdrawn_at IS NULL
        ORDER BY c.level, r.community_id
        """,
        (tenant, level, community_id, community_id),
    ).fetchall()
    keys = ("id", "level", "parent", "title", "summary", "rating", "rating_explanation", "findings",
            "source_chunk_ids", "model", "members", "embedding", "embed_model")
    return [dict(zip(keys, r)) for r in rows]


def graph_text_counts(conn: psycopg.Connection, tenant: str) -> dict[str, dict[str, dict[str, int]]]:
    """level -> kind (entities, relationships, reports) -> {"served": n, "withdrawn": n}."""
    rows = conn.execute(
        "SELECT access_level, kind, count(*) FILTER (WHERE withdrawn_at IS NULL), count(withdrawn_at)"
        " FROM graph_text WHERE tenant_id = %s GROUP BY access_level, kind ORDER BY access_level, kind",
        (tenant,),
    ).fetchall()
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for level, kind, served, withdrawn in rows:
        counts.setdefault(level, {})[kind] = {"served": served, "withdrawn": withdrawn}
    return counts


def community_counts(conn: psycopg.Connection, tenant: str) -> dict[str, int]:
    """level -> communities its last build clustered (a withdrawn report keeps its community until then)."""
    return dict(conn.execute(
        "SELECT access_level, count(*) FROM graph_communities WHERE tenant_id = %s GROUP BY access_level",
        (tenant,),
    ).fetchall())
