"""ACL users of the tests' Valkey servers."""

from __future__ import annotations

import redis

# A user that may run scripts but not functions (as some managed Redis plans allow).
NO_FUNCTIONS_USER = "dw-no-functions"
NO_FUNCTIONS_PASSWORD = "no-functions-password"


def add_user_refused_functions(server: redis.Redis) -> None:
    """``NO_FUNCTIONS_USER`` on ``server``: every command and key but FCALL and FUNCTION."""
    server.acl_setuser(
        NO_FUNCTIONS_USER,
        enabled=True,
        passwords=[f"+{NO_FUNCTIONS_PASSWORD}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-fcall", "-fcall_ro", "-function"],
    )
