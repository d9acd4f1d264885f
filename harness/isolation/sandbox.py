"""The sandbox user: the child runs as an unprivileged user of its own, and every
process of that user is killed when a child ends.

``--sandbox-user NAME`` (the Gradescope bundle's default: ``setup.sh`` creates
``mmspec-grader``) needs a grader running as root. The child's command is then run
behind ``setpriv`` (util-linux, in every Debian and Ubuntu image) with that user's uid
and gid, no supplementary groups and ``no_new_privs`` (no setuid program gives the
privileges back). So the submission cannot signal the grader or the reaper (another
uid), lower their limits (``prlimit`` needs the same uid), read their command lines'
secrets (none are there: a seed comes in a file) or any file that user may not read
(the rubric, ``grading.env``, the report directory: ``setup.sh`` and
``run_autograder`` make them root's alone). Whatever it starts runs as that user too,
so :func:`kill_user_processes` finds it wherever it went (docs/grading.md, Isolation).
"""

from __future__ import annotations

import os
import pwd
import signal
import time
from dataclasses import dataclass

#: The sandbox user's name unless told otherwise (``setup.sh`` creates it).
DEFAULT_USER = "mmspec-grader"
#: An environment variable that may name the sandbox user.
USER_ENV = "MMSPEC_SANDBOX_USER"
#: How long :func:`kill_user_processes` keeps killing before it gives up.
_GIVE_UP_SECONDS = 5.0


class SandboxError(ValueError):
    """The sandbox user cannot be used (unknown, root, or the grader is not root)."""


@dataclass(frozen=True)
class SandboxUser:
    name: str
    uid: int
    gid: int

    def prefix(self) -> tuple[str, ...]:
        """The words that run a command as this user."""
        return (
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--",
        )


def sandbox_user(name: str) -> SandboxUser:
    """The user ``name``, checked usable: it exists, is not root, and the grader is
    root (only root may become another user)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SandboxError(f"no user {name!r} (gradescope/setup.sh creates one)") from None
    if entry.pw_uid == 0:
        raise SandboxError(f"the sandbox user {name!r} is root")
    if os.geteuid() != 0:
        raise SandboxError(f"running the child as {name!r} needs a grader running as root")
    return SandboxUser(name, entry.pw_uid, entry.pw_gid)


def user_processes(uid: int) -> list[int]:
    """The live processes whose real, effective or saved uid is ``uid`` (Linux /proc;
    zombies are dead already and left to their parent)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as file:
                fields = dict(line.split(":", 1) for line in file if ":" in line)
        except OSError:
            continue
        zombie = fields.get("State", "").split()[:1] == ["Z"]  # dead, awaiting its parent
        if not zombie and str(uid) in fields.get("Uid", "").split()[:3]:
            found.append(int(name))
    return found


def kill_user_processes(uid: int) -> int:
    """SIGKILL every process of ``uid`` until none is left (a fork between two scans is
    caught by the next); how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + _GIVE_UP_SECONDS
    while time.monotonic() < deadline:
        left = [pid for pid in user_processes(uid) if pid != os.getpid()]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGSTOP)  # stopped, it cannot fork while we kill
            except (ProcessLookupError, PermissionError):
                pass
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    return len(killed)
