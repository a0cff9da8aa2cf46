"""TaskQ app layer."""
