"""The dead-letter queue (issue 5): nodes that failed for good, with what replay needs."""
