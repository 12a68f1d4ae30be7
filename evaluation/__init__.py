"""Evaluation of retrieval on datasets (`crossroads eval`, bench/): outside the serving path."""
