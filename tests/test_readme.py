"""The README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_block(after_heading_text: str) -> str:
    text = README.read_text()
    start = text.index(after_heading_text)
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)  # type: ignore[union-attr]


@pytest.mark.subprocess
def test_the_custom_agent_example_registers_its_type(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "triager.md").write_text("You sort tickets.")
    (tmp_path / "mymodule.py").write_text(python_block("Your own agent types"))
    code = (
        "from dagwright import Settings\n"
        "from dagwright.registry import build_registry\n"
        "registry = build_registry(Settings(imports=['mymodule']))\n"
        "t = registry.get('triager')\n"
        "print(t.queue, t.kind, t.model, ','.join(t.tools))\n"
        "print(registry.tools.get('lookup_ticket').schema()['input_schema']['required'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "dw.triager agent claude-haiku-5-5 read_input,lookup_ticket",
        "['ticket_id']",
    ]
