"""Request assembly (SPEC §4): validate, normalize, cache breakpoints, params."""
