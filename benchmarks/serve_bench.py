"""`attnwalk serve` with a room of students: many browser tabs at once on one server.

    python benchmarks/serve_bench.py [--sessions 30] [--lesson river_bank] [--stagger 0]

Run it with the Python attnwalk is installed in, with its serve and test extras (`pip install -e
'.[test]'`: textual-serve, aiohttp). Each tab is what textual-serve's page does over its
websocket (the size, then keys), not a browser: tests/test_serve_browser.py is the real browser.

  one tab alone      time from the page's connection to the picker on its screen
  N tabs at once     the same, all N connecting together (the worst case of a class arriving):
                     median and max; with --stagger S, one tab every S seconds instead (a class
                     arriving over half a minute)
  the walk           every tab picks the lesson at once: time to its first stage on screen; then
                     n in every tab: time to stage 2
  memory             with every tab in the walk: the server, and each tab's session + activity
                     processes, PSS (shared pages divided among the processes sharing them) and
                     RSS, from /proc/PID/smaps_rollup; per tab = the tabs' total / N
  held               after 10 s more, every tab still answers a key (b: back to stage 1)
  stop               Ctrl-C to the server's process group: seconds until it has exited, and the
                     processes of the tabs still alive after it (target: none)

Not a test: timings depend on the machine and its load. Prints a Markdown table for
benchmarks/README.md; exits 1 when a tab fails or a process is left.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import aiohttp  # noqa: E402

from served import KEYS, Served, alive, open_page  # noqa: E402

from attnwalk.scenario.builtins import builtin_names  # noqa: E402


def memory(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of a process in KB."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Pss", "Rss"):
            values[name] = int(rest.split()[0])
    return values.get("Pss", 0), values.get("Rss", 0)


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                    out.append(int(entry))
            except OSError:
                pass
    return out


async def classroom(served: Served, sessions: int, lesson: str, stagger: float) -> dict:
    down = [KEYS["down"]] * builtin_names().index(lesson)
    result: dict = {}
    async with aiohttp.ClientSession() as http:
        alone = await open_page(http, served.url)
        start = time.monotonic()
        await alone.wait_for("pick a lesson", timeout=60)
        result["alone"] = time.monotonic() - start
        await alone.close()
        await asyncio.sleep(2)

        async def arrive(i):
            await asyncio.sleep(i * stagger)
            page = await open_page(http, served.url)
            return page, await page.wait_for("pick a lesson", timeout=300)

        start = time.monotonic()
        arrived = await asyncio.gather(*(arrive(i) for i in range(sessions)))
        result["together"] = [t for _, t in arrived]
        result["all_in"] = time.monotonic() - start
        pages = [page for page, _ in arrived]

        async def walk(page):
            mark = await page.keys(*down, KEYS["enter"])
            return await page.wait_for("Stage 1 / 11", timeout=300, since=mark)

        result["walk"] = await asyncio.gather(*(walk(page) for page in pages))

        async def step(page, key, pattern):
            mark = await page.keys(key)
            return await page.wait_for(pattern, timeout=120, since=mark)

        result["n"] = await asyncio.gather(*(step(page, "n", "Stage 2 / 11") for page in pages))
        tabs = children(served.process.pid)
        per_tab = [(memory(s)[0] + sum(memory(a)[0] for a in children(s)),
                    memory(s)[1] + sum(memory(a)[1] for a in children(s)), len(children(s))) for s in tabs]
        result["tabs"] = len(tabs)
        result["activities"] = sum(n for _, _, n in per_tab)
        result["pss"] = sum(p for p, _, _ in per_tab) / len(per_tab)
        result["rss"] = sum(r for _, r, _ in per_tab) / len(per_tab)
        result["server"] = memory(served.process.pid)
        result["session_alone"] = statistics.median(memory(s) [0] for s in tabs)
        await asyncio.sleep(10)
        result["held"] = await asyncio.gather(*(step(page, "b", "Stage 1 / 11") for page in pages))
        processes = served.descendants()
        result["stop"] = await asyncio.get_running_loop().run_in_executor(None, served.stop, "ctrl-c")
        result["left"] = alive(processes)
        for page in pages:
            await page.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--lesson", default="river_bank")
    parser.add_argument("--stagger", type=float, default=0.0, metavar="S",
                        help="seconds between two tabs' arrivals (default: all at once)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with Served("--max-sessions", str(args.sessions + 5)) as served:
        r = asyncio.run(classroom(served, args.sessions, args.lesson, args.stagger))
    n = args.sessions
    ms = lambda s: f"{s * 1000:,.0f} ms"  # noqa: E731
    med = lambda xs: ms(statistics.median(xs))  # noqa: E731
    rows = [
        ("first screen, one tab alone", ms(r["alone"]), "connection to the picker on screen"),
        (f"first screen, {n} tabs " + (f"arriving {args.stagger:g} s apart" if args.stagger else "connecting together"),
         f"median {med(r['together'])}, max {ms(max(r['together']))}", f"all {n} in {ms(r['all_in'])}"),
        (f"{args.lesson}'s first stage, {n} tabs picking together", f"median {med(r['walk'])}, max {ms(max(r['walk']))}",
         "Enter to `Stage 1 / 11` on screen (a new process computes the walk)"),
        (f"n in {n} tabs together", f"median {med(r['n'])}, max {ms(max(r['n']))}", "to `Stage 2 / 11` on screen"),
        ("memory per tab (session + its walk)", f"**{r['pss'] / 1024:,.1f} MB PSS**, {r['rss'] / 1024:,.1f} MB RSS",
         f"{r['tabs']} sessions, {r['activities']} activities; a session alone {r['session_alone'] / 1024:,.1f} MB PSS"),
        (f"all {n} tabs", f"{r['pss'] * n / 1024 ** 2:,.2f} GB PSS", f"server {r['server'][0] / 1024:,.1f} MB PSS"),
        ("held 10 s more, then b in every tab", f"{len(r['held'])} of {n} answered, max {ms(max(r['held']))}", ""),
        ("Ctrl-C", f"{r['stop']:.1f} s to exit", f"processes left: {len(r['left'])}"),
    ]
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} CPUs\n")
    print("| what | result | notes |\n| --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0 if len(r["held"]) == n and not r["left"] and r["tabs"] == n else 1


if __name__ == "__main__":
    sys.exit(main())
