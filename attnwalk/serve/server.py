"""`attnwalk serve`: textual-serve's Server, each browser tab running the one fixed session command
(session.py), the page from templates/, at most --max-sessions tabs at once.

Stopping it (Ctrl-C, SIGTERM, SIGHUP) closes every tab's connection first, so each session ends its
activity and itself at once (rather than after aiohttp's 60 s of waiting for open connections),
and the server exits once they have.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path

from aiohttp import web
from textual_serve.server import Server

TEMPLATES = Path(__file__).resolve().parent / "templates"
SESSIONS_END = 10.0  # seconds: a session's activity has 3 to quit and 2 more after SIGTERM (session.py)
_HOST = re.compile(r"[A-Za-z0-9.\-]+(:\d+)?|\[[0-9A-Fa-f:.]+\](:\d+)?")  # a Host header to echo


def session_command(folder: Path | None, lang: str, listing: Path | None = None) -> str:
    """The command run for every tab: fixed when the server starts, nothing in it from a browser.
    (textual-serve runs it through a shell; `exec` makes the session that shell's process, so a
    session is one process and its end is the end of what the server started.)"""
    argv = [sys.executable, "-m", "attnwalk.serve", "--lang", lang]
    if folder is not None:
        argv += ["--lessons", str(folder.resolve())]
    if listing is not None:
        argv += ["--listing", str(listing)]
    return "exec " + shlex.join(argv)


class ClassroomServer(Server):
    def __init__(self, command: str, *, host: str, port: int, public_url: str | None,
                 max_sessions: int, lessons: int) -> None:
        super().__init__(command, host=host, port=port, title="attnwalk", public_url=public_url,
                         templates_path=TEMPLATES)
        self.max_sessions, self.lessons = max_sessions, lessons
        self.fixed_url = public_url
        self.open: set = set()  # the transports of the tabs connected now
        self._numbers = itertools.count(1)  # sessions, as the log counts them

    def initialize_logging(self) -> None:
        """textual-serve's log, without aiohttp's access line for every request (the page, its
        scripts, its websocket): the teacher's terminal gets one line as a session starts and one
        as it ends (handle_websocket)."""
        super().initialize_logging()
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    def serve(self, debug: bool = False) -> None:
        """textual-serve's serve, with SIGHUP (the teacher's terminal closed, or `kill -HUP`)
        stopping it as SIGTERM does, its sessions first, rather than killing it outright (which
        left every session running and the listing file in the cache)."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # the loop textual-serve's serve then takes as its own
        hangup = getattr(signal, "SIGHUP", None)
        if hangup is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(hangup, self.request_exit)
        super().serve(debug)

    async def handle_index(self, request: web.Request):
        """The page, its websocket at the address the browser used: textual-serve would write
        http://0.0.0.0:8000 into it under --host 0.0.0.0, which no student's browser can reach.
        (Set just before the page is made, with no await between: no other request interleaves.)"""
        host = request.host if _HOST.fullmatch(request.host or "") else f"{self.host}:{self.port}"
        self.public_url = self.fixed_url or f"{request.scheme}://{host}"
        return await super().handle_index(request)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        if len(self.open) >= self.max_sessions:  # each tab is two processes: refuse, not swap
            raise web.HTTPServiceUnavailable(text=f"attnwalk: {self.max_sessions} sessions are open "
                                             "already (serve --max-sessions)")
        transport = request.transport
        self.open.add(transport)
        number, began = next(self._numbers), time.monotonic()
        self.say(f"attnwalk: session {number} started ({len(self.open)} open)")
        try:
            return await super().handle_websocket(request)
        finally:
            self.open.discard(transport)
            minutes = (time.monotonic() - began) / 60
            self.say(f"attnwalk: session {number} ended after {minutes:.0f} min ({len(self.open)} open)")

    def say(self, line: str) -> None:
        self.console.print(line, highlight=False, soft_wrap=True)

    async def on_startup(self, app: web.Application) -> None:
        where = self.fixed_url or self.public_url
        if not self.fixed_url and self.host in ("0.0.0.0", "::", ""):  # every address: name none
            where = f"port {self.port} of every address of this computer (students open http://ADDRESS:{self.port})"
        self.console.print(f"attnwalk: serving {self.lessons} lessons on {where} "
                           "(Ctrl-C stops it and every session)", highlight=False, soft_wrap=True)

    async def on_shutdown(self, app: web.Application) -> None:
        """Close every tab's connection, then wait (bounded) while each handler stops its session
        (textual-serve's AppService.stop: quit, then the session's end), so that the server exits
        after its sessions, not before them."""
        for transport in list(self.open):
            if transport is not None:
                transport.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SESSIONS_END
        while (self.open or _children()) and loop.time() < deadline:
            await asyncio.sleep(0.05)


def _children() -> list[int]:
    """This server's child processes still running (zombies aside), from /proc where there is
    one. A tab's handler can end a moment before its session's process has: textual-serve stops
    reading a session at the end of its output, which the session's exit closes on its way out."""
    me = str(os.getpid())
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                found.append(int(entry))
    return found
