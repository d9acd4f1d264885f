"""Runs one command and, when it ends, kills every process it left behind.

``python harness/isolation/reaper.py COMMAND...`` (run as a script, standard library
only: it starts before anything of the project is imported) makes itself a *child
subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): a process that the command leaves
behind — a grandchild in a session of its own, a double fork — is re-parented to the
reaper instead of to init, so it stays findable. When the command ends, or when the
grader asks (``SIGTERM``), or when the grader dies (``PR_SET_PDEATHSIG``), the reaper
kills with ``SIGKILL`` every process below it and reaps them until it has no child
left, and only then exits — with the command's status: its exit code, or its death by
the same signal (the grader's messages, ``crashed with signal 11`` and the like, read
the same). Inherited file descriptors (the child's socket) pass through.

Every process the code under test starts is a descendant of the reaper, so none
outlives grading — unless it kills the reaper first, which a process of the same user
can: against that, run the child as another user (docs/grading.md, "Isolation").
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
#: How long the reaper keeps killing before it gives up (processes it may not signal).
_GIVE_UP_SECONDS = 5.0


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def descendants(root: int) -> list[int]:
    """The processes below ``root`` (Linux /proc), children before their children."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    frontier = [root]
    while frontier:
        below = [c for p in frontier for c in parents.get(p, [])]
        found += below
        frontier = below
    return found


def kill_all_below() -> None:
    """SIGKILL every descendant and reap them, until no child is left (an orphan comes
    to the subreaper, so no child at all means no descendant at all)."""
    deadline = time.monotonic() + _GIVE_UP_SECONDS
    while time.monotonic() < deadline:
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        time.sleep(0.01)


def _exit_as(status: int) -> None:
    """Exit the way the command did: its code, or its death by the same signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # those cannot be handled
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)  # a signal that does not end a process
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(command: list[str]) -> None:
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)  # the grader died: clean up all the same
    stop = False

    def asked_to_stop(_number: int, _frame: object) -> None:
        nonlocal stop
        stop = True
        kill_all_below()

    signal.signal(signal.SIGTERM, asked_to_stop)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    status = None
    while status is None:
        try:
            done, code = os.waitpid(-1, 0)  # reaps adopted orphans as they die, too
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if done == pid:
            status = code
    kill_all_below()
    # asked to stop, the handler reaped the command itself: it died of SIGKILL (a wait
    # status of 9 reads as "killed by signal 9")
    _exit_as(status if status is not None else (signal.SIGKILL if stop else 0))


if __name__ == "__main__":
    main(sys.argv[1:])
