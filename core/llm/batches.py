"""Message Batches for bulk LLM work (`crossroads graph build --batch`, chunk contexts of `crossroads ingest
--batch`): the same requests at half the price (core.llm.pricing.BATCH_FACTOR), answered within 24 hours instead of at once.

A step runs its items through `BatchLLM.map`. Each item's work runs with the `BatchLLM` as its LLM,
which answers a request from the results collected so far, or notes the request and raises
`Deferred`: the item stops before it has done anything (no cache write, no count), since a step's
code only acts on a reply. The requests noted in a pass go out as one batch; once it has ended, its
results are collected and the deferred items run again. An item that needs a further call (a
gleaning round, a reply asked again after a malformed or cut one) defers again and goes into the
next batch, so a step takes as many batches as its longest chain of calls: usually one. Re-running
an item is cheap (no request is sent twice: the replies are in memory) and deterministic.

A request's custom_id is the sha256 of its parameters: the same request has the same id in every
process, and results are matched by it, never by their order. Submitted requests are recorded in
`llm_batch_requests` (tenant, custom_id -> batch id), so a build that died (or was cancelled) while a
batch was running is followed by one that finds its requests there and collects that batch rather
than pay for them again. The rows of collected requests are deleted when the build ends (`finish`):
their results are then in the build's caches. An errored, expired or canceled entry is a failed call
(an `LLMError`: counted, not cached, the job ends `partial`); its row is deleted at once, so the next
build sends it again.

Collected results are kept on their rows (`result`) until a build uses them, so a batch is downloaded
once, whoever collects it: a batch build, a build without `--batch` (`CollectingLLM`: it answers the
requests an earlier batch build sent from that batch, waiting for it if it is still running, and sends
only the others one by one), or `graph status` (`collect_finished`: the batches that have ended, no wait).

An ingest with `--batch` (vector/ingest/runner.py) is a job like a build here (`job="ingest"`: named in what
to run again): it sends its chunk contexts through `BatchLLM.map`, leaves its rows to the next ingest when it
dies (with `--batch` or without: `CollectingLLM` again), and deletes those it used once the contexts are
written (cached with their chunks).
"""
from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
import logging
import threading
import time
from typing import Any, Callable, Iterable, Iterator, TypeVar

from psycopg.types.json import Jsonb

from core import jobs
from core.database import Database
from core.errors import CrossroadsError
from core.llm.client import AnthropicLLM, LLMResponse, Task
from core.llm.usage import Usage
from core.llm.errors import LLMError

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

# The API's error types, as the statuses they come with when sent alone: a 400 to a forced tool_choice
# is then recognised by core.llm.prompting and asked again with `auto`, as in an interactive build.
_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
           "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
           "overloaded_error": 529}


# The API's limits on one Message Batch: 100,000 requests, 256 MB. A part stops short of the size, since the
# request envelope adds to the parameters' JSON; an ingest's contexts each carry their whole document.
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 200 * 1024 * 1024


class Deferred(Exception):
    """A request with no collected result yet. Not an `LLMError`: no step mistakes it for a failure."""


def custom_id(params: dict[str, Any]) -> str:
    """The request's id in a batch: the sha256 of its parameters (64 hex characters, the API's limit)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Collector:
    """What `BatchLLM` and `CollectingLLM` share: the results of Message Batches, collected once (from their
    rows when already downloaded, else from the API), answering requests by custom_id.

    `job_id`: the build's job, set before the build runs: its cancel request stops the wait for a batch,
    and the rows of the requests it submits name it. `poll_s`: seconds between looks at a running batch.
    `job`: what sends the requests ("build", "ingest"), named in the errors that tell what to run again."""

    def __init__(self, llm: AnthropicLLM, db: Database, tenant: str, poll_s: float, *, job: str = "build"):
        self.llm, self.db, self.tenant, self.poll_s, self.job = llm, db, tenant, poll_s, job
        self.models, self.concurrency = llm.models, llm.concurrency
        self.job_id: int | None = None
        self._lock = threading.Lock()
        self._answers: dict[str, Any] = {}  # custom_id -> the result's message, or an LLMError's (message, status)
        self._replies: dict[str, LLMResponse] = {}  # custom_id -> its reply, metered once, when first used

    @property
    def stats(self):
        """What the calls measured (core.llm.stats.CallStats), as the wrapped LLM's."""
        return self.llm.stats

    def thinking_budget(self, stage: str, model: str) -> int:
        return self.llm.thinking_budget(stage, model)

    def finish(self) -> None:
        """The build has ended: the results it used are in its caches, so their rows go."""
        with self._lock:
            used = sorted(self._answers)
        with self.db.connection() as conn:
            conn.execute("DELETE FROM llm_batch_requests WHERE tenant_id = %s AND custom_id = ANY(%s)",
                         (self.tenant, used))

    def _answered(self, task: Task, params: dict[str, Any], cid: str) -> LLMResponse:
        """The reply to a request whose result was collected (`cid` in `_answers`)."""
        with self._lock:
            answer, reply = self._answers[cid], self._replies.get(cid)
        if isinstance(answer, tuple):
            raise LLMError(answer[0], status=answer[1])
        if reply is not None:  # an item deferred later on runs again: its earlier replies were paid for once
            return LLMResponse(reply.text, reply.tool_input, reply.stop_reason, reply.model, Usage(calls=0))
        reply = self.llm.reply(params, answer, task=task, batch=True)
        with self._lock:
            self._replies[cid] = reply
        return reply

    def _gather(self, batch_id: str, *, wait: bool = True) -> None:
        """Take in a batch's results: those kept on its rows, and, when some are not there yet, the API's
        (waiting for the batch to end; without `wait`, only if it has ended)."""
        from anthropic.types import Message  # deferred as in core.llm.client: the SDK is imported once a key is used

        with self.db.connection() as conn:
            rows = conn.execute("SELECT custom_id, result FROM llm_batch_requests WHERE tenant_id = %s "
                                "AND batch_id = %s", (self.tenant, batch_id)).fetchall()
        with self._lock:
            for cid, result in rows:
                if result is not None:
                    self._answers[cid] = Message.model_validate(result)
        if any(result is None for _, result in rows):
            self._collect(batch_id, wait=wait)

    def _collect(self, batch_id: str, *, wait: bool = True) -> bool:
        """Wait for the batch to end (or look once, without `wait`) and take in its results, keeping the
        succeeded ones on their rows; one that is gone is forgotten (sent again). False: not ended yet."""
        model = self.llm.models["fast"]
        try:
            while True:
                self._stop_if_cancelled()
                batch = self._call(lambda: self.llm.client.messages.batches.retrieve(batch_id), model,
                                   f"look at Message Batch {batch_id}")
                if batch.processing_status == "ended":
                    break
                if not wait:
                    return False
                time.sleep(self.poll_s)
            entries = self._call(lambda: list(self.llm.client.messages.batches.results(batch_id)), model,
                                 f"download the results of Message Batch {batch_id}")
        except CrossroadsError as exc:
            if not isinstance(exc.__cause__, LLMError) or exc.__cause__.status != 404:
                raise
            # results are kept 29 days; a batch older than that (or of another API key) cannot be collected
            log.warning("Message Batch %s is gone (%s); its requests are sent again", batch_id, exc)
            with self.db.connection() as conn:
                conn.execute("DELETE FROM llm_batch_requests WHERE tenant_id = %s AND batch_id = %s "
                             "AND result IS NULL", (self.tenant, batch_id))
            return True
        failed, kept = [], []
        with self._lock:
            for entry in entries:
                result = entry.result
                if result.type == "succeeded":
                    self._answers[entry.custom_id] = result.message
                    kept.append((Jsonb(result.message.model_dump(mode="json")), self.tenant, entry.custom_id))
                    continue
                failed.append(entry.custom_id)
                if result.type == "errored":
                    problem = result.error.error
                    self._answers[entry.custom_id] = (
                        f"the request failed in Message Batch {batch_id}: {problem.type}: {problem.message}; "
                        f"not cached: the next {self.job} sends it again", _STATUS.get(problem.type))
                else:  # expired (not processed within 24 hours) or canceled
                    self._answers[entry.custom_id] = (
                        f"the request {result.type} in Message Batch {batch_id} before it was processed; "
                        f"not cached: run the {self.job} again to send it again", None)
        with self.db.connection() as conn, conn.cursor() as cur:
            if kept:  # downloaded once: a build that dies before using them finds them here
                cur.executemany("UPDATE llm_batch_requests SET result = %s WHERE tenant_id = %s AND custom_id = %s",
                                kept)
            if failed:
                cur.execute("DELETE FROM llm_batch_requests WHERE tenant_id = %s AND custom_id = ANY(%s)",
                            (self.tenant, failed))
        return True

    def _call(self, call: Callable[[], T], model: str, what: str) -> T:
        """A Batches API call with the LLM's retries; its final failure stops the build (nothing is lost:
        what was submitted is recorded and collected by the next build)."""
        import anthropic

        try:
            return self.llm._send(lambda headers: call(), model)
        except LLMError as exc:
            raise CrossroadsError(f"could not {what}: {exc}; run the {self.job} again: it collects the batches "
                                  "already sent") from exc
        except anthropic.AnthropicError as exc:  # not an API answer: a malformed result line, say
            raise CrossroadsError(f"could not {what}: {exc}; run the {self.job} again") from exc

    def _stop_if_cancelled(self) -> None:
        """A wait for a batch may last hours: a cancel request ends it (the batch is collected next build)."""
        if self.job_id is None:
            return
        watch = jobs.JobWatch(self.job_id)
        with self.db.connection() as conn:
            watch.note(jobs.update_job(conn, self.job_id))
        watch.raise_if_stopped()


class BatchAnsweringLLM(Collector, ABC):
    """`LLM` over collected Message Batch results: builds each request and its custom_id, and leaves to the
    subclass whether the reply comes from a batch or is sent now."""

    def complete(self, *, task: Task, system: str, messages: list[dict], max_tokens: int = 1024,
                 cached_prefix: str | None = None, tools: list[dict] | None = None,
                 tool_choice: dict | None = None, temperature: float | None = None) -> LLMResponse:
        params = self.llm.request(task=task, system=system, messages=messages, max_tokens=max_tokens,
                                  cached_prefix=cached_prefix, tools=tools, tool_choice=tool_choice,
                                  temperature=temperature)
        return self._answer(task, params, custom_id(params))

    @abstractmethod
    def _answer(self, task: Task, params: dict[str, Any], cid: str) -> LLMResponse:
        """The reply to the request `params` (custom_id `cid`): from a batch, or sent now."""


class BatchLLM(BatchAnsweringLLM):
    """`LLM` whose calls go out in Message Batches, through `llm`'s client, priced at the batch price."""

    def __init__(self, llm: AnthropicLLM, db: Database, tenant: str, poll_s: float, *, job: str = "build"):
        super().__init__(llm, db, tenant, poll_s, job=job)
        self.batches = 0  # batches this build created
        self._wanted: dict[str, dict[str, Any]] = {}  # custom_id -> parameters, deferred in the current pass

    def _answer(self, task: Task, params: dict[str, Any], cid: str) -> LLMResponse:
        with self._lock:
            if cid not in self._answers:
                self._wanted[cid] = params
                raise Deferred(cid)
        return self._answered(task, params, cid)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """`fn` over `items`, their results in the items' order, as a thread pool's `map` (what steps use
        without batches); an exception other than `Deferred` propagates. One batch per pass."""
        items = list(items)
        results: dict[int, R] = {}
        todo = range(len(items))
        while todo:
            deferred = []
            for i in todo:
                try:
                    results[i] = fn(items[i])
                except Deferred:
                    deferred.append(i)
            if deferred:
                with self._lock:
                    wanted, self._wanted = self._wanted, {}
                self._settle(wanted)
            todo = deferred
        return (results[i] for i in range(len(items)))

    # --- one pass's requests ----------------------------------------------------------------------
    def _settle(self, wanted: dict[str, dict[str, Any]]) -> None:
        """A result for every request in `wanted`: from batches an earlier build submitted, else from a new one."""
        known = pending_requests(self.db, self.tenant, sorted(wanted))
        if known:
            log.info("collecting %d requests from Message Batches sent earlier (%s), not sending them again",
                     len(known), ", ".join(sorted(set(known.values()))))
        for batch_id in sorted(set(known.values())):
            self._gather(batch_id)
        fresh = {cid: params for cid, params in wanted.items() if cid not in self._answers}
        # all parts sent before any is waited for: they run side by side
        for batch_id in [self._submit(part) for part in batch_parts(fresh)]:
            self._collect(batch_id)
        for cid in wanted:
            if cid not in self._answers:  # never expected: guards the passes against going round forever
                self._answers[cid] = ("the Message Batch's results did not include this request; run the "
                                      f"{self.job} again to send it again", None)

    def _submit(self, requests: dict[str, dict[str, Any]]) -> str:
        model = next(iter(requests.values()))["model"]
        batch = self._call(lambda: self.llm.client.messages.batches.create(
            requests=[{"custom_id": cid, "params": params} for cid, params in sorted(requests.items())]), model,
            "send a Message Batch")
        # recorded at once: a build that dies from here on leaves the batch to the next one to collect. The row
        # names a build's job only: the batch collection job queues that build again with its parameters, which
        # a re-index job's (a folder, not a level) are not
        sent_by = self.job_id if self.job == "build" else None
        with self.db.connection() as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO llm_batch_requests (tenant_id, custom_id, batch_id, job_id) "
                            "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, custom_id) DO UPDATE "
                            "SET batch_id = EXCLUDED.batch_id, job_id = EXCLUDED.job_id, submitted_at = now(), "
                            "result = NULL",
                            [(self.tenant, cid, batch.id, sent_by) for cid in requests])
        self.batches += 1
        log.info("sent Message Batch %s with %d requests", batch.id, len(requests))
        return batch.id


class CollectingLLM(BatchAnsweringLLM):
    """`LLM` of a build without `--batch` that an earlier batch build left requests to collect (`pending`:
    custom_id -> batch id): those are answered from their batch (kept results, or collected from the API,
    waiting for it to end: sending them again would pay twice), every other call goes to `llm` at once.
    Without `wait` (an HTTP request, which cannot wait hours), a batch still running is not waited for: its
    requests are sent now, paid again rather than holding the caller."""

    def __init__(self, llm: AnthropicLLM, db: Database, tenant: str, poll_s: float, pending: dict[str, str], *,
                 job: str = "build", wait: bool = True):
        super().__init__(llm, db, tenant, poll_s, job=job)
        self._pending, self._wait = pending, wait
        self._gathered: set[str] = set()
        self._gathering = threading.Lock()  # one thread collects a batch; the others wait for it

    def _answer(self, task: Task, params: dict[str, Any], cid: str) -> LLMResponse:
        batch_id = self._pending.get(cid)
        if batch_id is not None:
            with self._gathering:
                if batch_id not in self._gathered:
                    log.info("collecting Message Batch %s sent by an earlier build, not sending its requests again",
                             batch_id)
                    self._gather(batch_id, wait=self._wait)
                    self._gathered.add(batch_id)
            with self._lock:
                answered = cid in self._answers
            if answered:
                return self._answered(task, params, cid)
        # not in a batch, or its batch is gone (older than 29 days): sent now
        return self.llm.send(params, task=task)


def batch_parts(requests: dict[str, dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """`requests` (custom_id -> parameters) in parts that each fit in one Message Batch, in custom_id order."""
    parts: list[dict[str, dict[str, Any]]] = []
    size = 0
    for cid, params in sorted(requests.items()):
        n = len(json.dumps(params, ensure_ascii=False).encode()) + len(cid) + 32
        if not parts or len(parts[-1]) >= MAX_BATCH_REQUESTS or size + n > MAX_BATCH_BYTES:
            parts.append({})
            size = 0
        parts[-1][cid] = params
        size += n
    return parts


def pending_requests(db: Database, tenant: str, ids: list[str] | None = None) -> dict[str, str]:
    """custom_id -> batch id of the tenant's requests sent in Message Batches and not yet used by a build
    (only those among `ids`, when given)."""
    with db.connection() as conn:
        if ids is None:
            rows = conn.execute("SELECT custom_id, batch_id FROM llm_batch_requests WHERE tenant_id = %s", (tenant,))
        else:
            rows = conn.execute("SELECT custom_id, batch_id FROM llm_batch_requests WHERE tenant_id = %s "
                                "AND custom_id = ANY(%s)", (tenant, ids))
        return dict(rows.fetchall())


def collect_finished(llm: AnthropicLLM, db: Database, tenant: str) -> None:
    """Download the results of the tenant's Message Batches that have ended (`graph status`), without waiting
    for the others: kept on their rows, the next build uses them without paying again."""
    collector = Collector(llm, db, tenant, poll_s=0.0)
    with db.connection() as conn:
        ids = [b for (b,) in conn.execute("SELECT DISTINCT batch_id FROM llm_batch_requests WHERE tenant_id = %s "
                                          "AND result IS NULL ORDER BY 1", (tenant,)).fetchall()]
    for batch_id in ids:
        collector._collect(batch_id, wait=False)


def waiting(conn, tenant: str) -> list[dict]:
    """The tenant's Message Batches whose requests no build has used yet (`graph status`), oldest first, with
    how many of their results are collected (kept for the next build)."""
    rows = conn.execute("SELECT batch_id, job_id, count(*), count(result), min(submitted_at) FROM llm_batch_requests "
                        "WHERE tenant_id = %s GROUP BY batch_id, job_id ORDER BY 5, 1", (tenant,)).fetchall()
    return [{"batch_id": b, "job_id": j, "requests": n, "collected": c, "submitted_at": at} for b, j, n, c, at in rows]
