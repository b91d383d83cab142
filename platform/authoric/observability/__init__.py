"""What operators see of a running server: logs, metrics."""
