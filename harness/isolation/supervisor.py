"""Start, talk to, time out and bury the isolated child process.

The child is ``python -m harness.isolation.child`` (behind an optional command
prefix, e.g. ``sudo -n -C 1000 -u grader`` or ``bwrap ...``), in a session of its own
(a Ctrl-C at the terminal reaches the grader, not the child), with:

- one end of a socket pair as its only channel to the grader (passed as a file
  descriptor; its stdin is /dev/null, its stdout and stderr go to a file the grader
  shows as "submission output" and never parses);
- ``RLIMIT_AS`` and ``RLIMIT_CPU`` set by the child itself, soft and hard, before it
  imports the code under test;
- a wall-clock deadline per request: the grader waits for the reply at most that long,
  then kills the child (SIGKILL to its process group).

When the child is gone, :attr:`Child.death` says why in words: ``timeout: no answer
within 2 s``, ``out of memory (limit 2 GiB)``, ``crashed with signal 11 (SIGSEGV)``,
``exited with code 0``, ``CPU time limit of 300 s exceeded (SIGXCPU)``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness import names
from harness.isolation import wire
from harness.isolation.sandbox import SandboxUser, kill_user_processes

#: An environment variable that may hold the child command prefix (shell words).
PREFIX_ENV = "MMSPEC_CHILD_PREFIX"


@dataclass(frozen=True)
class Limits:
    """The limits the isolated child runs under (docs/grading.md, "Isolation")."""

    call_seconds: float = 10.0
    property_seconds: float = 120.0
    memory_bytes: int = 2 * 1024**3
    cpu_seconds: int = 300
    #: The largest reply the grader reads from the child (its pickle, in bytes): the
    #: child's memory limit does not bound what decoding a reply costs the grader.
    reply_bytes: int = 32 * 1024**2
    #: Words put before the child's command line (an OS sandbox, another uid).
    child_prefix: tuple[str, ...] = ()
    #: The unprivileged user the child runs as (:mod:`.sandbox`); None: the grader's.
    sandbox: SandboxUser | None = None
    #: The users a forked worker's children run as, one worker each (``--sandbox-user
    #: A,B,C``: B and C); none: under a sandbox user the grade runs in one process.
    worker_sandboxes: tuple[SandboxUser, ...] = ()

    def command(self, words: list[str]) -> list[str]:
        """The command line that runs ``words`` (a Python command) as the child: under
        the reaper, as the sandbox user, behind the prefix."""
        user = self.sandbox.prefix() if self.sandbox is not None else ()
        return contained([*user, *self.child_prefix, *words])

    def bury(self, process: subprocess.Popen[bytes]) -> None:
        """End a child started with :meth:`command`, everything below it, and every
        process of the sandbox user."""
        bury(process)
        if self.sandbox is not None:
            kill_user_processes(self.sandbox.uid)

    def describe(self) -> str:
        prefix = f", child prefix {' '.join(self.child_prefix)!r}" if self.child_prefix else ""
        if self.sandbox is not None:
            workers = ", ".join(user.name for user in self.worker_sandboxes)
            workers = f" (a forked worker's children: one of {workers})" if workers else ""
            prefix = f", as user {self.sandbox.name}{workers}{prefix}"
        return (
            f"child process (per call {_seconds(self.call_seconds)}, per property "
            f"{_seconds(self.property_seconds)}, memory {size_text(self.memory_bytes)}, "
            f"CPU {self.cpu_seconds} s, replies {size_text(self.reply_bytes)}{prefix})"
        )


def _seconds(value: float) -> str:
    return f"{value:g} s"


def size_text(value: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value} B"


class ChildGone(Exception):
    """The child died, timed out or broke the protocol; the message says how."""


class Child:
    """One child process and its end of the socket pair."""

    def __init__(self, limits: Limits, output: IO[bytes]) -> None:
        self.limits = limits
        self.output = output
        self.death: str | None = None
        ours, theirs = socket.socketpair()
        self.sock = ours
        command = limits.command(
            [
                sys.executable,
                "-m",
                names.module("harness.isolation.child"),
                str(theirs.fileno()),
                str(limits.memory_bytes),
                str(limits.cpu_seconds),
            ]
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(names.IMPORT_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        # One BLAS thread: less virtual memory under RLIMIT_AS, no CPU oversubscription.
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[name] = "1"
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=(theirs.fileno(),),
                cwd=os.getcwd(),  # a relative adapter path means what it means here
                env=env,
                start_new_session=True,
            )
        finally:
            theirs.close()

    @property
    def alive(self) -> bool:
        return self.death is None

    def request(
        self, message: Any, timeout: float, serve: Callable[[Any], Any] | None = None
    ) -> Any:
        """Send ``message`` and return the reply, waiting at most ``timeout`` seconds;
        raises :class:`ChildGone` (and the child is dead) otherwise. Frames the child
        sends before its reply that are callbacks (``("callback", ...)``: a stand-in
        the grader holds, called by the child, :mod:`.standins`) are answered by
        ``serve`` on the way, within the same time."""
        if self.death is not None:
            raise ChildGone(self.death)
        deadline = time.monotonic() + timeout
        try:
            self._set_timeout(deadline)
            wire.send(self.sock, message)
            while True:
                self._set_timeout(deadline)
                header = wire.recv_exact(self.sock, wire.HEADER_SIZE)
                size = wire.frame_size(header, self.limits.reply_bytes)
                self._set_timeout(deadline)
                frame = wire.decode_frame(wire.recv_exact(self.sock, size))
                if not (serve and isinstance(frame, tuple) and frame[:1] == ("callback",)):
                    return frame
                answer = serve(frame)
                if self.death is not None:  # a call the stand-in made killed the child
                    raise ChildGone(self.death)
                self._set_timeout(deadline)
                wire.send(self.sock, ("callback_reply", answer))
        except TimeoutError:
            self.kill(f"timeout: no answer within {_seconds(timeout)}")
        except (EOFError, ConnectionError, BrokenPipeError):
            self._bury()
        except wire.FrameTooLarge as e:
            self.kill(
                f"reply too large: {e.size} bytes, over the limit of {size_text(e.limit)} "
                "(--reply-limit)"
            )
        except wire.WireError as e:
            self.kill(f"broke the protocol: {e}")
        assert self.death is not None
        raise ChildGone(self.death)

    def _set_timeout(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)

    def kill(self, reason: str) -> None:
        """Kill the child (if it still runs) and record ``reason`` as its death."""
        self._terminate()
        if self.death is None:
            self.death = reason

    def _terminate(self) -> None:
        self.limits.bury(self.process)
        self.sock.close()

    def _bury(self) -> None:
        """The child closed the pipe: wait for it and say how it ended."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill("closed the pipe but did not exit")
            return
        self.limits.bury(self.process)  # what it left behind
        self.sock.close()
        self.death = describe_exit(code, self.limits)

    def cpu_seconds_used(self) -> float | None:
        """The child's CPU time so far (Linux /proc), or None where unknown."""
        reaper = self.process.pid
        try:
            below = Path(f"/proc/{reaper}/task/{reaper}/children").read_text().split()
            pid = int(below[0]) if below else reaper  # the command the reaper runs
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            return None
        return ticks / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """End the child politely (closing its pipe makes it exit), then surely."""
        if self.death is None:
            self.sock.close()
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            self.death = "closed by the grader"
        self._terminate()


#: Runs a command and kills whatever it leaves behind (a script: stdlib only).
REAPER = Path(__file__).with_name("reaper.py")


def contained(command: list[str]) -> list[str]:
    """``command`` run under the reaper (:mod:`.reaper`): started with
    ``start_new_session=True`` and ended with :func:`bury`, nothing it starts, in any
    session, outlives it."""
    return [sys.executable, "-I", str(REAPER), *command]


def bury(process: subprocess.Popen[bytes]) -> None:
    """End a :func:`contained` process and everything below it, and wait: the reaper
    is asked (SIGTERM: it kills every descendant, then exits as its command did); its
    process group is killed outright if it does not answer (a reaper the code under
    test killed or stopped)."""
    if process.poll() is None:
        try:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=_REAPER_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


#: How long the reaper has to clean up before its process group is killed outright.
_REAPER_SECONDS = 8.0


def describe_exit(code: int, limits: Limits) -> str:
    """A child's exit status in words."""
    if code >= 0:
        return f"exited with code {code}"
    number = -code
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    if number == signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_seconds} s exceeded ({name})"
    if number == signal.SIGKILL:
        return f"killed by signal {number} ({name}: out of memory or the CPU hard limit?)"
    return f"crashed with signal {number} ({name})"
