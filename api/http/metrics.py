"""Prometheus metrics of one app: request latency per route, degraded and empty results, LLM tokens and cost.

Each app gets its own registry (several apps in one process, as in tests, do not collide). Routes
are labelled by their template (`/v1/documents/{doc_id}`), never by the raw path, and methods by
name only when standard, so a client cannot blow up the label set (each label value is a time series
kept for the life of the process): requests that matched no route share the route `unmatched`, made-up
methods the method `other`.
"""
from __future__ import annotations

import re
import time

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"})
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "crossroads_http_request_duration_seconds", "Time to answer a request (whole body, streams included).",
            ["method", "route"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.requests = Counter(
            "crossroads_http_requests", "Requests answered, by route and status code.",
            ["method", "route", "status"], registry=self.registry,
        )
        self.results = Counter(
            "crossroads_results", "Searches and answers served (the denominator of the empty-result rate).",
            ["endpoint"], registry=self.registry,
        )
        self.empty = Counter(
            "crossroads_empty_results", "Searches with no hit and answers with no answer in the corpus.",
            ["endpoint"], registry=self.registry,
        )
        self.degraded = Counter(
            "crossroads_degraded_results", "Results served by a fallback (reranker, LLM, a search leg down).",
            ["endpoint"], registry=self.registry,
        )
        self.tokens = Counter(
            "crossroads_llm_tokens", "LLM tokens spent for API requests and jobs.", ["kind"], registry=self.registry,
        )
        self.cost = Counter("crossroads_llm_cost_usd", "LLM cost in US dollars.", registry=self.registry)

    def result(self, endpoint: str, *, empty: bool, degraded: bool) -> None:
        self.results.labels(endpoint).inc()
        if empty:
            self.empty.labels(endpoint).inc()
        if degraded:
            self.degraded.labels(endpoint).inc()

    def usage(self, usage: dict | None) -> None:
        """Add a usage dict (`input_tokens`, `output_tokens`, `cache_*_tokens`, `cost_usd`)."""
        for kind in ("input", "output", "cache_read", "cache_write"):
            value = (usage or {}).get(f"{kind}_tokens") or 0
            if value > 0:
                self.tokens.labels(kind).inc(value)
        cost = (usage or {}).get("cost_usd") or 0
        if cost > 0:
            self.cost.inc(cost)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """Times every HTTP request and counts it by route template and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def tracking_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            route = scope.get("route")
            template = re.sub(r":\w+}", "}", getattr(route, "path", None) or "unmatched")  # {doc_id:path}
            method = scope["method"] if scope["method"] in HTTP_METHODS else "other"
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - started)
            self.metrics.requests.labels(method, template, str(status)).inc()
