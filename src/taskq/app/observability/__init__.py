"""What an operator sees of a worker: traces, metrics, the health socket, task dumps."""
