"""Sandboxed execution of model-written code (issue 6): docker and bubblewrap backends."""
