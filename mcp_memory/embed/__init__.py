"""Embedders: the local models shipped inside installed packages, and an OpenAI-compatible endpoint."""
