"""What agents' tools may reach: http_get, the API's web tools, the egress door."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from dagwright.settings.section import CommaList, Section


def bare_domains(domains: list[str]) -> list[str]:
    """The API takes ``example.com``, not a URL: a scheme would match nothing."""
    with_scheme = [domain for domain in domains if "://" in domain]
    if with_scheme:
        raise ValueError(f"give domains without http(s):// (got {with_scheme[0]!r})")
    return domains


@dataclass(frozen=True)
class WebToolSettings:
    """One server-side web tool, as the API is offered it (``WebToolsSettings.search``)."""

    max_uses: int
    allowed_domains: tuple[str, ...]
    blocked_domains: tuple[str, ...]
    max_content_tokens: int | None = None  # web fetch only


class HttpToolSettings(Section):
    """The http_get tool: what it may fetch, and how much."""

    prefix: ClassVar[str] = "http_"

    allowed_domains: CommaList = Field(default_factory=list)
    """Domains the http_get tool may fetch (``example.com`` also allows its subdomains);
    empty: none. Comma-separated in the environment."""

    max_bytes: int = Field(1_000_000, ge=1024)
    """Largest response body http_get reads."""

    timeout_s: float = Field(15.0, gt=0)
    """Timeout of one http_get request."""


class WebToolsSettings(Section):
    """The Messages API's server-side web tools (search, fetch): whether agents are offered
    them, and their limits."""

    prefix: ClassVar[str] = "web_"
    flat_names: ClassVar[dict[str, str]] = {
        "search_enabled": "web_search",
        "fetch_enabled": "web_fetch",
    }

    search_enabled: bool = False
    """Offer the Messages API's server-side web search to the agent types that list
    ``web_search`` (the researcher): the API searches, dagwright runs nothing. Each search
    is billed (``web_search_usd_per_1k``). Not on Bedrock or Vertex AI."""

    search_max_uses: int = Field(5, ge=1)
    """Most searches of one LLM call (the API's ``max_uses``)."""

    search_allowed_domains: CommaList = Field(default_factory=list)
    """Only these domains in search results (the API's ``allowed_domains``; a domain
    also covers its subdomains); empty: any. Not together with the blocked list."""

    search_blocked_domains: CommaList = Field(default_factory=list)
    """Never these domains in search results (the API's ``blocked_domains``)."""

    fetch_enabled: bool = False
    """Offer the Messages API's server-side web fetch to the agent types that list
    ``web_fetch``: the API fetches a page or PDF whose URL the conversation holds (the
    model cannot make one up). Its content is billed as input tokens only."""

    fetch_max_uses: int = Field(5, ge=1)
    """Most fetches of one LLM call (the API's ``max_uses``)."""

    fetch_allowed_domains: CommaList = Field(default_factory=list)
    """Only these domains may be fetched (the API's ``allowed_domains``); empty: any.
    Not together with the blocked list."""

    fetch_blocked_domains: CommaList = Field(default_factory=list)
    """Never these domains (the API's ``blocked_domains``)."""

    fetch_max_content_tokens: int | None = Field(None, ge=1)
    """Cut a fetched page at about this many tokens (the API's ``max_content_tokens``);
    None: the API's default."""

    _bare_domains = field_validator(
        "search_allowed_domains",
        "search_blocked_domains",
        "fetch_allowed_domains",
        "fetch_blocked_domains",
    )(bare_domains)

    @model_validator(mode="after")
    def _one_domain_list_per_web_tool(self) -> WebToolsSettings:
        for tool in ("search", "fetch"):
            if getattr(self, f"{tool}_allowed_domains") and getattr(
                self, f"{tool}_blocked_domains"
            ):
                raise ValueError(
                    f"web_{tool}_allowed_domains and web_{tool}_blocked_domains cannot both "
                    "be set (the API takes one of them): keep one"
                )
        return self

    @property
    def search(self) -> WebToolSettings | None:
        """Web search as the API is offered it; None where it is turned off."""
        if not self.search_enabled:
            return None
        return WebToolSettings(
            max_uses=self.search_max_uses,
            allowed_domains=tuple(self.search_allowed_domains),
            blocked_domains=tuple(self.search_blocked_domains),
        )

    @property
    def fetch(self) -> WebToolSettings | None:
        """Web fetch as the API is offered it; None where it is turned off."""
        if not self.fetch_enabled:
            return None
        return WebToolSettings(
            max_uses=self.fetch_max_uses,
            allowed_domains=tuple(self.fetch_allowed_domains),
            blocked_domains=tuple(self.fetch_blocked_domains),
            max_content_tokens=self.fetch_max_content_tokens,
        )


class EgressSettings(Section):
    """The one door out: which private addresses it lets through, and its resolver's bound."""

    prefix: ClassVar[str] = "egress_"

    allow: CommaList = Field(default_factory=list)
    """Where webhooks and the http_get tool may go though the egress filter refuses it by
    default (loopback, private, link-local, unique-local, multicast, reserved and cloud
    metadata addresses, ``localhost``): CIDRs (``10.0.0.0/8``, ``127.0.0.1``) and host
    names (trusted whatever they resolve to), comma-separated. Empty: only public
    addresses."""

    resolve_timeout_s: float = Field(5.0, gt=0, le=60)
    """Bound of resolving the host of a webhook or http_get request (the egress filter
    checks every address it resolves to before connecting to one of them)."""

    _bare_domains = field_validator("allow")(bare_domains)
