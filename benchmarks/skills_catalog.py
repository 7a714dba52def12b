"""What progressive disclosure saves: the input tokens of an agent's first request with
10 skills installed (the catalog: names and descriptions in the system prompt, bodies
loaded on demand) against the same 10 skills' bodies inlined in the system prompt.

    python benchmarks/skills_catalog.py [--skills 10] [--body-chars 6000]

Each side runs a ``writer`` node through dagwright's agent loop and the real
``anthropic`` SDK, against ``dagwright.testing``'s fake Messages API, prompt caching off
(so every input token is in ``input_tokens``), on ``claude-sonnet-5-5``:

- ``catalog``: the skills given to the type (``agent_skills``): its first request carries
  the catalog and the three skill tools' definitions;
- ``inlined``: no skill attached; the same bodies (each under its name and description)
  appended to the type's system prompt, as a prompt that ships every procedure would;
- ``no skills``: the type as it is, for the baseline.

How tokens are counted: by the fake, as its ``usage.input_tokens`` of the first request
and, again, by the SDK's ``messages.count_tokens`` on that request's body (the fake
answers both with the same rule: each block's JSON, as sent, over 4 characters, the
estimate dagwright's budgets use). It is not Claude's tokenizer: the ratio is the point,
the absolute numbers are estimates. The bodies are generated (numbered steps of
ordinary prose), ``--body-chars`` characters each, about 1,500 tokens: the specification
recommends bodies under 5,000 tokens. Prints the three counts and the ratio; exits 1 if
the catalog does not cost less than the inlined bodies.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))  # run as a script: dagwright from this checkout

import anthropic  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from dagwright.llm.anthropic import AnthropicLLM  # noqa: E402
from dagwright.models import Node  # noqa: E402
from dagwright.registry import build_registry  # noqa: E402
from dagwright.settings import Settings  # noqa: E402
from dagwright.testing import FakeAnthropicServer, MemoryServices  # noqa: E402
from dagwright.workers.agent_loop import AgentSpec, run_agent  # noqa: E402

MODEL = "claude-sonnet-5-5"
STEPS = (
    "Read the inputs of the task and list what they say about {topic}.",
    "Check each claim about {topic} against the sources, and drop what none supports.",
    "Group what is left by the part of the {topic} it concerns, most important first.",
    "Write one short paragraph per group, plain words, no jargon the reader must look up.",
    "Name the source of every figure; round figures as the source does, never more.",
    "End with what is still unknown about the {topic}, and who could answer it.",
)


def skill_text(index: int, body_chars: int) -> tuple[str, str, str]:
    """Name, description and body of generated skill ``index``."""
    topic = f"area {index}"
    name = f"procedure-{index:02d}"
    description = (
        f"Writes the standard report on {topic} from research notes, in the house style. "
        f"Use when asked for a report, a summary or a briefing about {topic}."
    )
    lines, step = [f"# Report on {topic}", ""], 0
    while sum(len(line) + 1 for line in lines) < body_chars:
        lines.append(f"{step + 1}. " + STEPS[step % len(STEPS)].format(topic=topic))
        step += 1
    return name, description, "\n".join(lines)


def write_skills(directory: Path, count: int, body_chars: int) -> list[tuple[str, str, str]]:
    skills = [skill_text(i, body_chars) for i in range(1, count + 1)]
    for name, description, body in skills:
        (directory / name).mkdir()
        (directory / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"
        )
    return skills


def first_request_tokens(
    fake: FakeAnthropicServer, settings: Settings, spec: AgentSpec, tools: Any
) -> tuple[int, int]:
    """The first request's input tokens: as its answer's usage says, and as the SDK's
    count_tokens says of the same body."""
    fake.reset()
    fake.add({"match": {}, "reply": {"content": [{"type": "text", "text": "done"}]}})
    services = MemoryServices(AnthropicLLM(settings.llm))
    ctx = services.context(settings=settings, node_id="report")
    run_agent(ctx, Node(id="report", type="writer", instruction="Write the report."), spec, tools)
    body = fake.requests[0].body
    sdk = anthropic.Anthropic(base_url=fake.base_url, api_key="benchmark")
    counted = sdk.messages.count_tokens(
        model=body["model"], system=body["system"], messages=body["messages"], tools=body["tools"]
    )
    return services.usage.input_tokens, counted.input_tokens


def inlined(spec: AgentSpec, skills: list[tuple[str, str, str]]) -> AgentSpec:
    sections = [f"## Skill {name}\n\n{description}\n\n{body}" for name, description, body in skills]
    return replace(spec, system_prompt="\n\n".join([spec.system_prompt.rstrip(), *sections]))


def measure(count: int, body_chars: int) -> dict[str, tuple[int, int]]:
    with FakeAnthropicServer() as fake, tempfile.TemporaryDirectory() as folder:
        skills = write_skills(Path(folder), count, body_chars)
        common: dict[str, Any] = {
            "anthropic_base_url": fake.base_url,
            "anthropic_api_key": SecretStr("benchmark"),
            "default_model": MODEL,
            "llm_prompt_cache_ttl": "off",
        }
        base = Settings(**common)
        plain = build_registry(base)
        writer = plain.declaration("writer")
        assert isinstance(writer, AgentSpec)
        given = Settings(
            **common,
            skill_dirs=[Path(folder)],
            agent_skills={"writer": [name for name, _, _ in skills]},
        )
        skilled = build_registry(given)
        skilled_writer = skilled.declaration("writer")
        assert isinstance(skilled_writer, AgentSpec)
        return {
            "no skills": first_request_tokens(fake, base, writer, plain.tools),
            "catalog": first_request_tokens(fake, given, skilled_writer, skilled.tools),
            "inlined": first_request_tokens(fake, base, inlined(writer, skills), plain.tools),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=10)
    parser.add_argument("--body-chars", type=int, default=6000)
    args = parser.parse_args(argv)
    counts = measure(args.skills, args.body_chars)
    print(f"{args.skills} skills, bodies of {args.body_chars} characters; first request's")
    print(f"{'input tokens':<28}{'usage':>10}{'count_tokens':>14}")
    for label, (used, counted) in counts.items():
        print(f"{label:<28}{used:>10,}{counted:>14,}")
    catalog, inline = counts["catalog"][0], counts["inlined"][0]
    print(f"inlined / catalog: {inline / catalog:.2f}x ({inline - catalog:,} tokens saved)")
    return 0 if catalog < inline else 1


if __name__ == "__main__":
    raise SystemExit(main())
