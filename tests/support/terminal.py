"""A command run in a real pseudo-terminal, its screen read through the pyte emulator.

Asserting on what a person would see (the emulated screen) rather than on raw escape
codes: a live view redraws in place, and only the emulator knows what is left on screen.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
from types import TracebackType

import pyte

from tests.support.processes import REPO_ROOT


class Terminal:
    """``dagwright ARGS`` on a ``columns`` x ``rows`` pseudo-terminal."""

    def __init__(self, *args: str, env: dict[str, str], columns: int = 140, rows: int = 40) -> None:
        self.screen = pyte.Screen(columns, rows)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        self.screens: list[str] = []  # every screen drawn, as text (for "did X ever show")
        self.output = bytearray()  # everything written to the terminal, for failure messages
        master, child_end = os.openpty()
        fcntl.ioctl(child_end, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dagwright", *args],
            cwd=REPO_ROOT,
            env=env,
            stdin=child_end,
            stdout=child_end,
            stderr=child_end,
            start_new_session=True,
        )
        os.close(child_end)
        self._master = master
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:  # EIO: the command exited and the terminal closed
                data = b""
            if not data:
                return
            with self._lock:
                self.output += data
                self._stream.feed(data)
                self.screens.append(self._text())

    def _text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def text(self) -> str:
        """What the screen shows now."""
        with self._lock:
            return self._text()

    def seen(self, predicate: object) -> str | None:
        """The first screen drawn so far for which ``predicate(text)`` holds."""
        with self._lock:
            screens = list(self.screens)
        return next((text for text in screens if predicate(text)), None)  # type: ignore[operator]

    def wait(self, timeout: float) -> int:
        code = self.process.wait(timeout)
        self._reader.join(10)  # the screen has everything the command wrote
        return code

    def interrupt(self) -> None:
        """Ctrl-C, as the terminal would deliver it."""
        self.process.send_signal(signal.SIGINT)

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._reader.join(10)
        os.close(self._master)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
