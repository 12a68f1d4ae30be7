"""The HTTP API (FastAPI) and the analysts' web page; the work is in api.usecases and router."""
