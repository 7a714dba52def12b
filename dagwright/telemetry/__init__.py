"""What dagwright records about its own work: spans for traces, counters for metrics."""
