"""The sandbox user: the child runs as an unprivileged user of its own, and every
process of that user is killed when a child ends.

``--sandbox-user NAME[,NAME...]`` (the Gradescope bundle's default: ``setup.sh`` creates
``mmspec-grader`` and one more user for each forked worker, ``mmspec-grader-1``, ...)
needs a grader running as root. The first user runs the grader's own child; each forked
worker (``--jobs``) claims one of the others for its children, so that burying one
worker's child (every process of its user) never touches another's. The child's command
is then run behind ``setpriv`` (util-linux, in every Debian and Ubuntu image) with that user's uid
and gid, no supplementary groups and ``no_new_privs`` (no setuid program gives the
privileges back). So the submission cannot signal the grader or the reaper (another
uid), lower their limits (``prlimit`` needs the same uid), read their command lines'
secrets (none are there: a seed comes in a file) or any file that user may not read
(the rubric, ``grading.env``, the report directory: ``setup.sh`` and
``run_autograder`` make them root's alone). Whatever it starts runs as that user too,
so :func:`kill_user_processes` finds it wherever it went (docs/grading.md, Isolation).
"""

from __future__ import annotations

import math
import os
import pwd
import signal
import time
from dataclasses import dataclass
from pathlib import Path

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


def sandbox_users(names: str) -> tuple[SandboxUser, ...]:
    """The users of a comma-separated list (``--sandbox-user``), each checked usable by
    :func:`sandbox_user`, none named twice (two workers sharing a user would bury each
    other's children)."""
    listed = [name.strip() for name in names.split(",")]
    if not all(listed):
        raise SandboxError(f"an empty name in the sandbox users {names!r}")
    twice = sorted({name for name in listed if listed.count(name) > 1})
    if twice:
        raise SandboxError(f"the sandbox user {', '.join(twice)} is named twice")
    users = tuple(sandbox_user(name) for name in listed)
    shared = sorted({u.name for u in users if [v.uid for v in users].count(u.uid) > 1})
    if shared:
        raise SandboxError(f"the sandbox users {', '.join(shared)} share a uid")
    return users


#: What a sandbox user must not read where the grader runs (setup.sh hides them): the
#: reference, which stands in from the grader's process only, and the models.
ANSWER_KEY = ("reference/adapter.py", "properties/models/encoder_cache.py", "properties/oracles.py")


def answer_key_open_to(user: SandboxUser, home: Path) -> list[str]:
    """The files of :data:`ANSWER_KEY` under ``home`` that ``user`` may read, by their and
    their folders' mode bits (owner, group, others: the child runs with its own group
    alone). From a checkout all of them: only the bundle's setup.sh hides them."""
    def allows(path: Path, bit: int) -> bool:
        st = path.stat()
        if st.st_uid == user.uid:
            return bool(st.st_mode & (bit << 6))
        if st.st_gid == user.gid:
            return bool(st.st_mode & (bit << 3))
        return bool(st.st_mode & bit)

    found = []
    for name in ANSWER_KEY:
        path = home / name
        try:
            folders = [home / folder for folder in Path(name).parents if folder != Path(".")]
            if allows(path, 4) and all(allows(folder, 1) for folder in folders):
                found.append(name)
        except OSError:
            continue
    return found


#: Where a cgroup (v2, then v1) states the CPU time its processes may use per period.
CPU_QUOTA_FILES = (
    (Path("/sys/fs/cgroup/cpu.max"), None),
    (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")),
)


def usable_cpus(quota_files: tuple[tuple[Path, Path | None], ...] = CPU_QUOTA_FILES) -> int:
    """How many CPUs this process may keep busy: the CPUs it may run on, fewer where its
    cgroup's CPU quota allows less (a container given half a CPU has one usable, however
    many the machine shows), at least one. An isolated grade runs a worker and its child
    per CPU: more workers than that only take turns, each round trip slower."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere, every CPU
    count = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    for quota_file, period_file in quota_files:
        try:
            words = quota_file.read_text(encoding="ascii").split()
            if period_file is not None:
                words = [words[0], *period_file.read_text(encoding="ascii").split()[:1]]
            quota, period = words[0], words[1]
        except (OSError, IndexError):
            continue
        if quota in ("max", "-1"):
            break
        try:
            count = min(count, math.floor(int(quota) / int(period)))
        except (ValueError, ZeroDivisionError):
            continue
        break
    return max(1, count)


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
