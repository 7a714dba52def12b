"""Plans: read from files (``files``), built in Python (``builder``), validated (``validation``).

All of it pure: no Redis, no broker, the same for file, builder and LLM plans.
"""
