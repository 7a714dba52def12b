"""Make the README's picture of the dashboard: docs/images/dashboard.png.

    python docs/tools/dashboard_screenshot.py                  # the diamond plan of the quickstart
    python docs/tools/dashboard_screenshot.py --plan FILE --node ID --output PNG

What a newcomer sees after the quickstart: ``dagwright up`` (an embedded Valkey, workers, the
dashboard) in a private data directory, ``dagwright run examples/plans/diamond.yaml`` on it,
then the run's page opened by the one-time login link of ``dagwright dashboard``, with the
panel of the plan's output node open (its address: ``/runs/<run>#node=d``). The browser is
Debian's chromium, headless, driven by chromium-driver through Selenium (the test extra), as
the browser tests drive it: nothing is downloaded. The PNG is cut to 256 colours (Pillow, the
charts extra) to stay small; it fails if it is wider than MAX_WIDTH or heavier than MAX_BYTES.

Every wait is bounded (READY_S, RUN_S, DRAWN_S); the stack is stopped as Ctrl-C stops it,
then killed if it has not ended within STOP_S.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("DAGWRIGHT_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("DAGWRIGHT_CHROMEDRIVER", "/usr/bin/chromedriver"))
WINDOW = (1000, 620)
MAX_WIDTH = 1200
MAX_BYTES = 150_000
READY_S, RUN_S, DRAWN_S, STOP_S = 90.0, 60.0, 30.0, 30.0


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """``check()``'s first truthy answer, polled until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answer := check():
            return answer
        time.sleep(0.2)
    raise SystemExit(f"gave up after {timeout:.0f} s waiting for {what}")


def dagwright(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dagwright", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@contextmanager
def local_stack(data_dir: Path) -> Iterator[dict[str, str]]:
    """``dagwright up`` with its own data directory; yields the environment to reach it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGWRIGHT_", "ANTHROPIC_"))}
    env["DAGWRIGHT_DATA_DIR"] = str(data_dir)
    log = (data_dir / "up.log").open("w")
    up = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "up", "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: dagwright(env, "dashboard").returncode == 0, READY_S, "dagwright up")
        yield env
    finally:
        up.send_signal(signal.SIGINT)  # as Ctrl-C: running nodes finish, processes end
        try:
            up.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait(timeout=STOP_S)
        log.close()


def finished_run(env: dict[str, str], plan: Path) -> str:
    """The id of a run of ``plan`` on the stack, once it has ended."""
    started = dagwright(env, "run", str(plan), "--json", "--timeout", str(RUN_S))
    if started.returncode != 0:
        raise SystemExit(f"dagwright run failed: {started.stderr.strip()}")
    return str(json.loads(started.stdout)["run_id"])


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"):
        options.add_argument(argument)
    options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def screenshot(env: dict[str, str], run_id: str, node: str, shot: Path) -> None:
    """The run's page, ``node``'s panel open, as a PNG at ``shot``."""
    link = dagwright(env, "dashboard").stdout.strip()
    driver = browser()
    try:
        driver.set_window_size(*WINDOW)
        driver.get(link)  # logs in, then shows the runs
        base = link.split("/login")[0]
        driver.get(f"{base}/runs/{run_id}#node={node}")
        script = "return document.getElementById('panel').dataset.node || null"
        wait_for(lambda: driver.execute_script(script) == node, DRAWN_S, f"the panel of {node}")
        driver.execute_script("document.activeElement.blur()")  # no focus ring in the picture
        time.sleep(0.5)  # let the boxes' fill transition (0.3 s, dashboard.css) finish
        if not driver.save_screenshot(str(shot)):
            raise SystemExit("chromium made no screenshot")
    finally:
        driver.quit()


def shrink(shot: Path, output: Path) -> None:
    """``shot`` cut to 256 colours at ``output``, checked against MAX_WIDTH and MAX_BYTES."""
    from PIL import Image

    with Image.open(shot) as image:
        if image.width > MAX_WIDTH:
            raise SystemExit(f"the screenshot is {image.width} px wide, more than {MAX_WIDTH}")
        image.convert("RGB").quantize(colors=256).save(output, optimize=True)
    size = output.stat().st_size
    if size > MAX_BYTES:
        raise SystemExit(f"{output} is {size:,} bytes, more than {MAX_BYTES:,}")
    print(f"wrote {output.relative_to(ROOT)}: {image.width}x{image.height}, {size:,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, default=ROOT / "examples/plans/diamond.yaml")
    parser.add_argument("--node", default="d", help="the node whose panel is open")
    parser.add_argument("--output", type=Path, default=ROOT / "docs/images/dashboard.png")
    args = parser.parse_args()
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            raise SystemExit(f"{path} is missing (apt-get install chromium chromium-driver)")
    with tempfile.TemporaryDirectory(prefix="dagwright-shot-") as scratch:
        data_dir = Path(scratch)
        with local_stack(data_dir) as env:
            run_id = finished_run(env, args.plan.resolve())
            screenshot(env, run_id, args.node, data_dir / "shot.png")
        shrink(data_dir / "shot.png", args.output.resolve())


if __name__ == "__main__":
    main()
