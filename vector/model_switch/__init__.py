"""Embedding model switch: stage a new model's vectors, switch to them, drop the old ones."""
