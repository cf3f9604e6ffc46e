"""A running `attnwalk serve` for the tests and benchmarks/serve_bench.py: started as a teacher starts
it (its own process group, as a terminal's foreground job), pages opened as a browser opens them
(the websocket textual-serve's page speaks), and its processes counted from /proc."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-B]|\x1b[=>]")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`python -m attnwalk serve --port P ARGS` until stop(); its URL in `url`."""

    def __init__(self, *args: str, env: dict | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "attnwalk", "serve", "--port", str(self.port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env,
            start_new_session=True)  # its own group: Ctrl-C is sent to it as a terminal would
        self.first_line = self.process.stdout.readline()
        if "serving" not in self.first_line:
            self.stop()
            raise RuntimeError(f"attnwalk serve did not start: {self.first_line}")
        deadline = time.monotonic() + 20  # the line comes as the server starts, just before it listens
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def descendants(self) -> set[int]:
        return descendants(self.process.pid)

    def stop(self, how: str = "ctrl-c", timeout: float = 20) -> float:
        """Ctrl-C (SIGINT to the whole group, as a terminal sends it), SIGTERM or SIGHUP (to the
        server alone, as `kill` does); the seconds until the server has exited."""
        start = time.monotonic()
        if self.process.poll() is None:
            if how == "ctrl-c":
                os.killpg(self.process.pid, signal.SIGINT)
            else:  # `kill`, or the terminal it ran in closed (SIGHUP)
                self.process.send_signal(signal.SIGHUP if how == "sighup" else signal.SIGTERM)
        try:
            self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return time.monotonic() - start

    def output(self) -> str:
        return self.first_line + (self.process.stdout.read() if self.process.poll() is not None else "")

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc) -> None:
        leftovers = self.descendants() if self.process.poll() is None else set()
        self.stop()
        for pid in leftovers:  # only ours: the pids under this server, if a test failed midway
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def descendants(pid: int) -> set[int]:
    """Every process under `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


class Page:
    """One browser tab, as textual-serve's page talks to the server: the terminal's size, keys as
    stdin, and the screen as it comes, without its escape codes in `text`. It reads all the time,
    as a browser does (the server's heartbeat closes a connection that leaves its pings unanswered
    for 15 s, and the client answers them as it reads)."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.raw = bytearray()
        self.closed = False
        self.changed = asyncio.Event()
        self.reading = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                if message.type.name == "BINARY":
                    self.raw.extend(message.data)
                    self.changed.set()
        finally:
            self.closed = True
            self.changed.set()

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    async def wait_for(self, pattern: str, timeout: float = 30, since: int = 0) -> float:
        """Seconds until `pattern` (a regex) appears in the screen's text after byte `since`."""
        start = time.monotonic()
        while True:
            self.changed.clear()  # before the look: what arrives after it sets it again
            if re.search(pattern, ANSI.sub("", self.raw[since:].decode("utf-8", "replace"))):
                break
            remaining = timeout - (time.monotonic() - start)
            if remaining <= 0 or self.closed:
                raise TimeoutError(f"{pattern!r} not on the page; it ends with: {self.text[-800:]!r}")
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                continue
        return time.monotonic() - start

    async def closes(self, timeout: float) -> bool:
        """Whether the server closes the page's connection within `timeout` seconds."""
        try:
            await asyncio.wait_for(asyncio.shield(self.reading), timeout)
        except asyncio.TimeoutError:
            pass
        return self.closed

    async def keys(self, *keys: str) -> int:
        """Type keys (as the terminal in the page sends them); returns where the screen was."""
        mark = len(self.raw)
        for key in keys:
            await self.ws.send_str(json.dumps(["stdin", key]))
            await asyncio.sleep(0.05)
        return mark

    async def close(self) -> None:
        await self.ws.close()
        await self.reading


KEYS = {"enter": "\r", "down": "\x1b[B", "up": "\x1b[A", "escape": "\x1b"}


async def open_page(session, url: str, width: int = 100, height: int = 30, query: str = "") -> Page:
    ws = await session.ws_connect(f"{url.replace('http', 'ws')}/ws?width={width}&height={height}{query}")
    await ws.send_str(json.dumps(["resize", {"width": width, "height": height}]))
    return Page(ws)
