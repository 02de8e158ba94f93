"""The optional LLM: an OpenAI-compatible chat API used off the request path."""
