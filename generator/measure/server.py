"""The worker server: one process per repeat round that imports torch, transformers, peft and the model's code
once, then forks a fresh worker for each row it is sent. Run as ``python -m generator.measure.server MODULE...``
by the runner (generator/measure/runner.py), which owns its lifecycle.

It talks over its stdin and stdout, one JSON object a line: it says {"ready": ...} once its imports are done;
for each job it is sent it forks, says {"pid": ...}, and says {"exit": ...} with the worker's exit status
(negative: the signal that ended it) once the worker has ended. When its stdin closes it ends the running
worker, if any, and exits.

Ctrl-C is the parent's to handle: the server ignores SIGINT from its first line, before any import, and runs in
a session of its own, so a terminal's Ctrl-C reaches only the parent, which stops the worker and the server."""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)

import importlib  # noqa: E402  (after SIGINT is ignored: imports take seconds)
import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

POLL_SECONDS = 0.1


def _send(stream, message: dict) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def _run_child(request: dict, protocol_fd: int) -> None:
    """In the forked child: run the worker, then leave without running anything of the server's."""
    code = 1
    try:
        os.close(protocol_fd)
        from generator.measure.limits import MemoryLimit
        from generator.measure.worker import child_main

        limit = request.get("limit")
        memory_limit = MemoryLimit(limit["n_bytes"], limit["method"],
                                   Path(limit["cgroup"]) if limit["cgroup"] else None) if limit else None
        code = child_main(request["job"], request["paths"], memory_limit)
    finally:
        os._exit(code)


def _wait(pid: int) -> int | None:
    """The worker's exit status once it ends, or None if the server's stdin closed first (the worker is killed)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        readable, _, _ = select.select([0], [], [], POLL_SECONDS)
        if readable and not os.read(0, 1):  # EOF: the parent has gone (it sends nothing while a worker runs)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None


def main(modules: list[str]) -> None:
    """Import the modules, say ready, then serve one job at a time until stdin closes."""
    for name in modules:
        importlib.import_module(name)  # a name that does not resolve fails here, loudly
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints of the libraries go to the log, not into the protocol
    _send(protocol, {"ready": modules})
    requests = os.fdopen(0, "rb", buffering=0)  # unbuffered: _wait reads the same descriptor
    while line := requests.readline():
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(request, protocol.fileno())
        _send(protocol, {"pid": pid})
        code = _wait(pid)
        if code is None:
            return
        _send(protocol, {"exit": code})


if __name__ == "__main__":
    main(sys.argv[1:])
