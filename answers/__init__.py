"""Answer writing: the offline extractive writers (local, comparison, chain) and the LLM writer, over
the passages a route found. Sits between `router` (which picks a route) and `graph` / `vector`."""
