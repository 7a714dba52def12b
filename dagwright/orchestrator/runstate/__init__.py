"""The run state machine in Redis: every transition one fenced Lua script (``lua/``)."""
