"""The program run as a user runs it, bounded: under an address-space limit and a timeout, its
peak resident memory read from the kernel's accounting of that one child (os.wait4, in a launcher). Issues 16 and
27 ask every refusal to end "within 2 s and 300 MB" with exit 2 and one line: the tests hold
every case to 300 MB and, since the machine running them is shared, to TIMEOUT seconds (each
takes well under 2 on an idle machine; the report of issue 27 gives the figures by hand).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMORY = 1 << 30  # numpy and its BLAS threads need a few hundred MB of address space to start
TIMEOUT = 30  # seconds: a hang is caught; the 2 s of the issues is measured by hand, not on a shared machine
PEAK_RSS = 300 * 1024 * 1024


# The command is started by this small launcher, not by the test process: a process's peak RSS
# (ru_maxrss) keeps the high-water mark of the memory it was forked or spawned from, which late in
# the whole suite is the pytest process itself (389 MB measured for a refused export). The launcher
# is a fresh interpreter of a few MB; it sets the limit, runs the command in a child of its own and
# hands that child's peak back through a pipe, then ends as the command ended.
_LAUNCHER = """
import os, resource, signal, sys
report, limit, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
pid = os.fork()
if pid == 0:
    os.close(report)
    os.execv(command[0], command)
_, status, usage = os.wait4(pid, 0)
os.write(report, str(usage.ru_maxrss).encode())
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.WEXITSTATUS(status))
"""


def attnwalk(*args: str, stdin=subprocess.DEVNULL, stdout=None, cwd: Path = ROOT,
             env: dict[str, str] | None = None, timeout: float = TIMEOUT,
             ) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m attnwalk ARGS`: its result (stdout and stderr as text; stdout empty when
    `stdout` names where it goes instead) and how long it took. Its peak memory must stay under
    PEAK_RSS and its time under `timeout`."""
    environ = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), **(env or {}))
    start = time.perf_counter()
    read_rss, write_rss = os.pipe()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        launch = [sys.executable, "-c", _LAUNCHER, str(write_rss), str(MEMORY), sys.executable, "-m", "attnwalk"]
        proc = subprocess.Popen([*launch, *args], stdout=out_file if stdout is None else stdout,
                                stderr=err_file, stdin=stdin, env=environ, cwd=cwd, pass_fds=(write_rss,),
                                start_new_session=True)
        os.close(write_rss)
        try:
            status = _wait(proc.pid, start, timeout)
        finally:
            with os.fdopen(read_rss, "rb") as pipe:
                peak = pipe.read()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out_file.seek(0)
        err_file.seek(0)
        result = subprocess.CompletedProcess(proc.args, proc.returncode,
                                             out_file.read().decode("utf-8", "replace"),
                                             err_file.read().decode("utf-8", "replace"))
    assert peak, f"the launcher reported no peak memory: {result.stderr[-2000:]}"
    assert int(peak) * 1024 < PEAK_RSS, f"peak memory {int(peak) // 1024} MB: {args}"
    return result, time.perf_counter() - start


def _wait(pid: int, start: float, timeout: float) -> int:
    """os.waitpid for the launcher, killing its session (the command too) past `timeout`."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.perf_counter() - start > timeout:
            os.killpg(pid, 9)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(str(pid), timeout)
        time.sleep(0.01)


def refused(*args: str, where: str, code: int = 2, **kwargs) -> str:
    """The one line of a refusal: exit `code` (2; 1 for an output that cannot be written),
    nothing on stdout, no traceback, starts with `where` (`attnwalk: FILE:LINE: ...`)."""
    out, seconds = attnwalk(*args, **kwargs)
    assert out.returncode == code, (out.returncode, out.stderr[-2000:])
    assert out.stdout == "" and "Traceback" not in out.stderr and "MemoryError" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"attnwalk: {where}"), (lines[0], where)
    return lines[0]


def benchmark_layer(folder: Path) -> Path:
    """The benchmark layer (benchmarks/make_large.py: 512 tokens, d_model 768, 12 heads, causal,
    W_O), written into `folder`; its YAML's path."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from make_large import large_scenario
    finally:
        sys.path.pop(0)
    return large_scenario(folder)
