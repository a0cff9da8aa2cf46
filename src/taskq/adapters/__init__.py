"""TaskQ adapters layer."""
