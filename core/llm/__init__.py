"""The LLM client and everything around its calls: limiter, usage, pricing, batches, checks."""
