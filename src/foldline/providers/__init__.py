"""Model providers: the Anthropic Messages API and anything that speaks it (R0.2)."""
