"""TaskQ adapters/memory layer."""
