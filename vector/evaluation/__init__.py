"""Retrieval evaluation: datasets, document-level metrics, and the docs/benchmarks.md report (pure parts)."""
