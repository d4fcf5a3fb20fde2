"""`foldline serve`: a local server that speaks the Anthropic Messages API (SPEC §8)."""
