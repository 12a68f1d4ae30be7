"""Entity graph: extraction, resolution, communities, reports, global search."""
