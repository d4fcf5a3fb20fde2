"""Built-in tools and permissions (SPEC §9)."""
