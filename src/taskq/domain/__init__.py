"""TaskQ domain layer."""
