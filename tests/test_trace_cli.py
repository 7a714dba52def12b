"""``dagwright trace`` as users run it: a real subprocess, a real Valkey and worker.

The acceptance check: the PNG and SVG timelines are read back and every bar, mapped to
times through the scale the file embeds, matches its node's recorded start and end.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from dagwright.settings import Settings
from dagwright.telemetry.run_trace import Trace
from dagwright.telemetry.timeline import OUTCOME_COLOURS
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out, one_error_line
from tests.support.llm_script import text, turn

WRITER = "You are the writer"
TOLERANCE_S = 0.020

# Durations that differ clearly, and a node after both: misplaced or mis-sized bars show.
TIMED_PLAN = """
goal: three timed nodes
output: after
nodes:
  - {id: short, type: function, function: sleep, params: {seconds: 0.3}}
  - {id: long, type: function, function: sleep, params: {seconds: 0.8}}
  - {id: after, type: function, function: sleep, params: {seconds: 0.2},
     depends_on: [short, long]}
"""

AGENT_PLAN = """
goal: a note
output: write
nodes:
  - {id: facts, type: function, function: sleep, params: {seconds: 0.1}}
  - {id: write, type: writer, instruction: Write a note., depends_on: [facts]}
"""


@pytest.fixture
def env(settings: Settings, redis_client: object, worker: object, tmp_path: Path) -> dict[str, str]:
    return cli_env(settings, tmp_path / "data")


def finished_run(env: dict[str, str], tmp_path: Path, plan: str) -> dict[str, Any]:
    """Run ``plan`` with ``dagwright run --json``; then its ``status --json``."""
    path = tmp_path / "plan.yaml"
    path.write_text(plan)
    result = dagwright("run", str(path), "--json", env=env)
    assert result.returncode == 0, result.stderr
    run_id = json_out(result)["run_id"]
    status = dagwright("status", run_id, "--json", env=env)
    assert status.returncode == 0, status.stderr
    return json_out(status)  # type: ignore[no-any-return]


def recorded_times(run: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Each node's recorded start and end (epoch seconds), from ``status --json``."""
    return {
        node_id: (
            datetime.fromisoformat(node["started_at"]).timestamp(),
            datetime.fromisoformat(node["finished_at"]).timestamp(),
        )
        for node_id, node in run["nodes"].items()
    }


def assert_bars_match(bars: dict[str, tuple[float, float]], run: dict[str, Any], px_s: float):
    tolerance = max(px_s, TOLERANCE_S)
    recorded = recorded_times(run)
    assert set(bars) == set(recorded)
    for node_id, (start, end) in bars.items():
        assert start == pytest.approx(recorded[node_id][0], abs=tolerance), node_id
        assert end == pytest.approx(recorded[node_id][1], abs=tolerance), node_id
    # the bars really are of different lengths, and the dependent comes after both
    durations = {node_id: end - start for node_id, (start, end) in bars.items()}
    assert durations["long"] > durations["short"] + 0.3
    assert bars["after"][0] >= max(bars["short"][1], bars["long"][1]) - tolerance


def png_bars(path: Path) -> tuple[dict[str, tuple[float, float]], float]:
    """Each row's bar, found by its colour, mapped to times by the embedded scale."""
    image = Image.open(path).convert("RGB")
    meta = {k.removeprefix("dagwright:"): v for k, v in Image.open(path).text.items()}  # type: ignore[attr-defined]
    origin, px_per_s, left = (float(meta[k]) for k in ("origin_epoch_s", "px_per_s", "left_px"))
    top, row_height = int(meta["top_px"]), int(meta["row_height_px"])
    bar_middle = int(meta["bar_top_px"]) + int(meta["bar_height_px"]) // 2
    bars = {}
    for row, info in enumerate(json.loads(meta["rows"])):
        colour = OUTCOME_COLOURS[info["outcome"]]
        y = top + row * row_height + bar_middle
        columns = [x for x in range(image.width) if image.getpixel((x, y)) == colour]
        assert columns and columns == list(range(columns[0], columns[-1] + 1)), info
        bars[info["node"]] = (
            origin + (columns[0] - left) / px_per_s,
            origin + (columns[-1] + 1 - left) / px_per_s,
        )
    return bars, 1 / px_per_s


def svg_bars(path: Path) -> tuple[dict[str, tuple[float, float]], float]:
    root = ET.parse(path).getroot()
    origin, px_per_s, left = (
        float(root.attrib[f"data-{k}"]) for k in ("origin-epoch-s", "px-per-s", "left-px")
    )
    bars = {}
    for rect in root.iter("{http://www.w3.org/2000/svg}rect"):
        if rect.get("class") == "bar":
            x, width = float(rect.attrib["x"]), float(rect.attrib["width"])
            bars[rect.attrib["data-node"]] = (
                origin + (x - left) / px_per_s,
                origin + (x + width - left) / px_per_s,
            )
    return bars, 1 / px_per_s


@pytest.mark.subprocess
def test_png_bars_match_the_nodes_recorded_times(env: dict[str, str], tmp_path: Path) -> None:
    run = finished_run(env, tmp_path, TIMED_PLAN)
    output = tmp_path / "timeline.png"
    result = dagwright("trace", run["run_id"], "--format", "png", "--output", str(output), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{output}\n"
    bars, px_s = png_bars(output)
    assert_bars_match(bars, run, px_s)


@pytest.mark.subprocess
def test_svg_bars_match_the_nodes_recorded_times(env: dict[str, str], tmp_path: Path) -> None:
    run = finished_run(env, tmp_path, TIMED_PLAN)
    output = tmp_path / "timeline.svg"
    result = dagwright("trace", run["run_id"], "-o", str(output), env=env)  # svg by its name
    assert result.returncode == 0, result.stderr
    bars, px_s = svg_bars(output)
    assert_bars_match(bars, run, px_s)


@pytest.mark.subprocess
def test_the_default_image_file_is_named_after_the_run(env: dict[str, str], tmp_path: Path) -> None:
    run = finished_run(env, tmp_path, TIMED_PLAN)
    cwd = tmp_path / "out"
    cwd.mkdir()
    result = dagwright("trace", run["run_id"], "--format", "png", env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{run['run_id']}.png\n"
    assert Image.open(cwd / f"{run['run_id']}.png").format == "PNG"


@pytest.mark.subprocess
def test_the_tree_shows_every_node_and_llm_call(
    env: dict[str, str], tmp_path: Path, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(WRITER, 1, text("The note."), tokens=(300, 40)))
    run = finished_run(env, tmp_path, AGENT_PLAN)
    result = dagwright("trace", run["run_id"], env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"run {run['run_id']} succeeded · 2 nodes · 2 attempts")
    facts = next(line for line in lines if "facts #1" in line)
    assert "function succeeded" in facts
    write = next(i for i, line in enumerate(lines) if "write #1" in line)
    assert "writer succeeded" in lines[write]
    call = lines[write + 1]
    assert "llm.call claude-sonnet-5-5 · 300 in / 40 out tokens · $0." in call
    assert call.index("llm.call") > lines[write].index("write")  # drawn under its attempt


@pytest.mark.subprocess
def test_json_round_trips_into_a_trace(
    env: dict[str, str], tmp_path: Path, fake_llm: FakeAnthropicServer, settings: Settings
) -> None:
    fake_llm.add(turn(WRITER, 1, text("The note."), tokens=(300, 40)))
    run = finished_run(env, tmp_path, AGENT_PLAN)
    result = dagwright("trace", run["run_id"], "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    trace = Trace.model_validate(json_out(result))
    assert trace.run_id == run["run_id"] and trace.version == 1
    assert [(span.name, span.node) for span in trace.spans] == [
        ("run", None),
        ("node.attempt", "facts"),
        ("node.attempt", "write"),
        ("llm.call", "write"),
    ]
    assert json.loads(trace.model_dump_json()) == json_out(result)


def gantt_rows(stdout: str) -> dict[str, str]:
    """Row label -> what is between the two borders, for rows of attempts."""
    rows = {}
    for line in stdout.splitlines():
        match = re.match(r"^(\S+ #\d+)\s*│(.*)│", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


@pytest.mark.subprocess
def test_gantt_has_one_row_per_attempt_with_bars_in_proportion(
    env: dict[str, str], tmp_path: Path
) -> None:
    run = finished_run(env, tmp_path, TIMED_PLAN)
    result = dagwright("trace", run["run_id"], "--format", "gantt", env=env)
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stdout  # piped: no colour codes, bars still readable
    rows = gantt_rows(result.stdout)
    assert set(rows) == {"short #1", "long #1", "after #1"}
    created = datetime.fromisoformat(run["created_at"]).timestamp()
    run_s = datetime.fromisoformat(run["finished_at"]).timestamp() - created
    for label, cells in rows.items():
        start, end = recorded_times(run)[label.split(" ")[0]]
        per_s = len(cells) / run_s
        assert abs(cells.count("█") - (end - start) * per_s) <= 1.5, (label, cells)
        assert abs(cells.index("█") - (start - created) * per_s) <= 1.5, (label, cells)
    assert rows["long #1"].count("█") > 2 * rows["short #1"].count("█")


@pytest.mark.subprocess
def test_an_unknown_run_exits_2_with_one_line(env: dict[str, str]) -> None:
    result = dagwright("trace", "no-such-run", env=env)
    assert result.returncode == 2
    assert "no-such-run" in one_error_line(result)


@pytest.mark.subprocess
def test_a_missing_output_directory_exits_2_with_one_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "chart.png"
    result = dagwright("trace", "anything", "--format", "png", "--output", str(missing), env=env)
    assert result.returncode == 2
    assert f"no directory {missing.parent}" in one_error_line(result)


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "png", "-o", "x.svg"], "--format png does not match --output x.svg"),
        (["--format", "tree", "-o", "chart.svg"], "--format tree does not match --output"),
        (["--format", "svg", "-o", "chart.txt"], "name the file *.svg, not chart.txt"),
    ],
)
def test_a_format_the_file_name_contradicts_exits_2_with_one_line(
    env: dict[str, str], args: list[str], message: str
) -> None:
    result = dagwright("trace", "anything", *args, env=env)
    assert result.returncode == 2
    assert message in one_error_line(result)


@pytest.mark.subprocess
def test_an_unreachable_redis_exits_4_with_one_line(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data", DAGWRIGHT_REDIS_URL="redis://127.0.0.1:1/0")
    result = dagwright("trace", "anything", env=env, timeout=60)
    assert result.returncode == 4
    assert "cannot reach Redis" in one_error_line(result)


def without_pillow(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """``env`` for a dagwright whose ``import PIL`` fails as on a default install (no
    extras): a ``PIL`` package first on the path that raises what a missing one raises."""
    shadow = tmp_path / "no-pillow" / "PIL"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'PIL'\", name='PIL')\n"
    )
    return {**env, "PYTHONPATH": os.pathsep.join([str(shadow.parent), env.get("PYTHONPATH", "")])}


def test_an_svg_needs_no_pillow_and_a_png_says_which_extra(
    env: dict[str, str], tmp_path: Path
) -> None:
    run = finished_run(env, tmp_path, TIMED_PLAN)
    bare = without_pillow(env, tmp_path)
    svg = dagwright("trace", run["run_id"], "-o", str(tmp_path / "t.svg"), env=bare)
    assert svg.returncode == 0, svg.stderr
    assert svg_bars(tmp_path / "t.svg")[0].keys() == {"short", "long", "after"}
    png = dagwright("trace", run["run_id"], "-o", str(tmp_path / "t.png"), env=bare)
    assert png.returncode == 2
    assert "a PNG trace needs the 'PIL' package" in one_error_line(png)
    assert not (tmp_path / "t.png").exists()
