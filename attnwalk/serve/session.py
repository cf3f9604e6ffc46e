"""One browser tab's session: the command textual-serve runs for each tab (server.py), the same
for every tab and taking nothing from the browser:

    python -m attnwalk.serve [--lessons DIR] [--lang en|zh] [--listing FILE]

To the server it is a Textual app: it answers on stdout with the protocol Textual's WebDriver
speaks (a start line, then packets) and reads the browser's keys and sizes on stdin. Behind it,
one activity process at a time (activity.py), each started and read through textual-serve's own
AppService, as the server starts apps: the lesson picker, then the walk or the quiz picked, then
the picker again. A lesson is needed in separate processes because a Textual app that ends tells
the page the session is over; here an activity's end is the session's business, not the page's.

An activity's screen goes to the page as it comes; of what an app may ask of the page (open a URL,
download a file) nothing is passed on: the picker's choice arrives that way and stays here. The
session ends when the picker is left, at the server's quit, at the end of stdin, and on SIGINT,
SIGTERM or SIGHUP; the activity running then is asked to quit, then terminated, then killed,
and waited for, so no process outlives the session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from attnwalk.serve.lessons import ACTIVITIES, LANGS, SCHEME, Offered

PRELUDE = b"__GANGLION__\n"  # what a Textual app first writes to say it speaks the protocol
MAX_PACKET = 1 << 20  # a key, a resize or a paste; anything larger is no browser's
QUIT_WAIT, TERM_WAIT = 3.0, 2.0  # seconds an activity has to quit, then to end on SIGTERM


class Page:
    """The server's side of the session: packets written to the session's stdout."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def packet(self, kind: bytes, payload: bytes) -> None:
        await self.write(kind + len(payload).to_bytes(4, "big") + payload)

    async def data(self, payload: bytes) -> None:
        await self.packet(b"D", payload)


class Activity(AppService):
    """One activity process, its screen relayed to the page; its choice (the picker's) kept."""

    def __init__(self, argv: list[str], page: Page) -> None:
        # `exec`: the shell AppService starts the command with becomes the activity itself, so
        # the process ended at the session's end is the activity, not a shell above it
        super().__init__("exec " + shlex.join(argv), write_bytes=page.data, write_str=self._kept,
                         close=self._kept, download_manager=DownloadManager())
        self.choice: dict[str, str] | None = None
        self.ended = asyncio.Event()

    async def _kept(self, *_) -> None:
        """What the app would send the page besides its screen: nothing is sent."""

    async def on_meta(self, data: bytes) -> None:
        meta = json.loads(data)
        url = meta.get("url")
        if meta.get("type") == "open_url" and isinstance(url, str) and url.startswith(SCHEME):
            parts = urlsplit(url)
            query = {name: values[0] for name, values in parse_qs(parts.query).items()}
            self.choice = {"activity": parts.path, "lesson": query.get("lesson", ""),
                           "lang": query.get("lang", "")}

    async def on_packed(self, payload: bytes) -> None:
        """A file the app delivers: never passed on."""

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            self.ended.set()

    async def end(self) -> None:
        """Quit, then SIGTERM, then SIGKILL; returns once the process is gone."""
        process = self._process  # AppService keeps it to itself; the session must see it gone
        if process is None:
            return
        for step, wait in (("quit", QUIT_WAIT), ("term", TERM_WAIT), ("kill", None)):
            if process.returncode is not None:
                break
            try:
                if step == "quit":
                    await self.send_meta({"type": "quit"})
                elif step == "term":
                    process.terminate()
                else:
                    process.kill()
            except (ProcessLookupError, RuntimeError, ConnectionError):
                pass
            try:
                await asyncio.wait_for(process.wait(), wait)
            except TimeoutError:
                continue
        await process.wait()
        await self.ended.wait()


class Session:
    def __init__(self, page: Page, folder: Path | None, lang: str, listing: Path | None = None) -> None:
        self.page, self.folder, self.lang, self.listing = page, folder, lang, listing
        self.offered = Offered(folder)
        self.stop = asyncio.Event()
        self.current: Activity | None = None
        self.size = (_env_int("COLUMNS", 80), _env_int("ROWS", 24))

    def argv(self, run: str, lesson: str | None) -> list[str]:
        argv = [sys.executable, "-m", "attnwalk.serve.activity", "--run", run, "--lang", self.lang]
        if self.folder is not None:
            argv += ["--lessons", str(self.folder)]
        if self.listing is not None and run == "picker":
            argv += ["--listing", str(self.listing)]
        return argv + (["--lesson", lesson] if lesson else [])

    async def run(self) -> None:
        reading = asyncio.create_task(self.read_page())
        lesson, chosen = None, None
        try:
            while not self.stop.is_set():
                choice = chosen or await self.activity(self.argv("picker", lesson))
                if choice is None or not self.valid(choice):
                    break  # the student left the picker (or it failed): the session is over
                lesson, self.lang = choice["lesson"], choice["lang"]
                # a lesson's end page may choose what comes next (its quiz, the next lesson);
                # else, and for anything not offered, back to the picker
                made = await self.activity(self.argv(choice["activity"], lesson))
                chosen = made if made is not None and self.valid(made) else None
        finally:
            reading.cancel()
            if self.current is not None:
                await self.current.end()
            try:
                await self.page.packet(b"M", json.dumps({"type": "exit"}).encode())  # the page: ended
            except ConnectionError:
                pass

    def valid(self, choice: dict[str, str]) -> bool:
        return (choice["activity"] in ACTIVITIES and choice["lang"] in LANGS
                and self.offered.find(choice["lesson"]) is not None)

    async def activity(self, argv: list[str]) -> dict[str, str] | None:
        """Run one activity to its end (or the session's); its choice, if it made one."""
        if self.stop.is_set():
            return None
        activity = Activity(argv, self.page)
        size = self.size
        await activity.start(*size)
        self.current = activity  # only now: its stdin exists from start() on
        if self.size != size:  # the page was resized while it started
            await activity.set_terminal_size(*self.size)
        stopping = asyncio.create_task(self.stop.wait())
        ending = asyncio.create_task(activity.ended.wait())
        await asyncio.wait((stopping, ending), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        ending.cancel()
        await activity.end()  # ended by itself: waits for the process; else makes it end
        self.current = None
        return None if self.stop.is_set() else activity.choice

    async def read_page(self) -> None:
        """The browser's packets from the server: keys (D) to the activity; sizes, focus and blur
        (M) to it too; quit (M), or the end of stdin, end the session."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
        try:
            while True:
                kind = await reader.readexactly(1)
                size = int.from_bytes(await reader.readexactly(4), "big")
                if size > MAX_PACKET:
                    break
                payload = await reader.readexactly(size)
                await self.from_page(kind, payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.stop.set()

    async def from_page(self, kind: bytes, payload: bytes) -> None:
        if kind == b"D":
            if self.current is not None:
                await self.current.send_bytes(payload)
            return
        if kind != b"M":
            return
        meta = json.loads(payload)
        kind_of = meta.get("type")
        if kind_of == "quit":
            self.stop.set()
        elif kind_of == "resize":
            self.size = (_int(meta.get("width"), self.size[0]), _int(meta.get("height"), self.size[1]))
            if self.current is not None:
                await self.current.set_terminal_size(*self.size)
        elif kind_of in ("focus", "blur") and self.current is not None:
            await self.current.send_meta({"type": kind_of})


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and 1 <= value <= 1000 else default


def _env_int(name: str, default: int) -> int:
    try:
        return _int(int(os.environ.get(name, "")), default)
    except ValueError:
        return default


async def serve_session(folder: Path | None, lang: str, listing: Path | None = None) -> None:
    loop = asyncio.get_running_loop()
    # the packets go to the server on the real stdout; anything else written to fd 1 (AppService
    # copies an activity's stderr there) goes to stderr, which the server logs
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(os.dup(1), "wb"))
    os.dup2(2, 1)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    page = Page(writer)
    await page.write(PRELUDE)
    session = Session(page, folder, lang, listing)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, session.stop.set)
    try:
        await session.run()
        await writer.drain()
    except ConnectionError:  # the server is gone already: nothing to tell it
        pass
    # End here, the page's pipe still open: the server sees the session's output end only when
    # the process is gone, and waits for that before it exits itself (server.py)
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnwalk.serve")
    parser.add_argument("--lessons", type=Path)
    parser.add_argument("--lang", choices=LANGS, default="en")
    parser.add_argument("--listing", type=Path)
    args = parser.parse_args(argv)
    asyncio.run(serve_session(args.lessons, args.lang, args.listing))
    return 0
