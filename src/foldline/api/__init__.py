"""Request assembly (design.md §4): validate, normalize, cache breakpoints, params."""
