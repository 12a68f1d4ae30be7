"""Retrieval evaluation: datasets, document-level metrics, and the README report (pure parts)."""
