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


#: Where cgroups are mounted, and where this process names its own.
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
#: The memory a grade's worker may take with its child, with room to spare: a full build's
#: grade took 232 MiB at its peak in one worker and 415 MiB in two (PSS, the default
#: rubric in ``grading``; docs/verdict_cost.md, sixteenth session).
WORKER_MEMORY = 256 * 1024**2


def _cgroup_dirs(controller: str | None, proc: Path, root: Path) -> list[Path]:
    """The folders of this process's cgroup and of each cgroup above it, its own first:
    under ``root`` for cgroup v2 (``controller`` None), under ``root/controller`` for v1.
    A limit set on any of them binds. Inside a container the mount shows the container's
    own cgroup as the root, and a path from ``proc`` that is not there is skipped."""
    try:
        lines = proc.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        lines = []
    path = "/"
    for line in lines:
        _number, _, rest = line.partition(":")
        controllers, _, where = rest.partition(":")
        if (controller is None and controllers == "") or (
            controller is not None and controller in controllers.split(",")
        ):
            path = where
            break
    base = root if controller is None else root / controller
    parts = [part for part in path.split("/") if part and part not in (".", "..")]
    return [base.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def cpu_quota_files(
    proc: Path = PROC_CGROUP, root: Path = CGROUP_ROOT
) -> tuple[tuple[Path, Path | None], ...]:
    """Where a cgroup states the CPU time its processes may use per period: v2's
    ``cpu.max``, v1's quota and period, for this process's cgroup and those above it."""
    return (
        *((folder / "cpu.max", None) for folder in _cgroup_dirs(None, proc, root)),
        *(
            (folder / "cpu.cfs_quota_us", folder / "cpu.cfs_period_us")
            for folder in _cgroup_dirs("cpu", proc, root)
        ),
    )


def memory_limit_files(proc: Path = PROC_CGROUP, root: Path = CGROUP_ROOT) -> tuple[Path, ...]:
    """Where a cgroup states the memory its processes may use: v2's ``memory.max``, v1's
    ``memory.limit_in_bytes``, for this process's cgroup and those above it."""
    return (
        *(folder / "memory.max" for folder in _cgroup_dirs(None, proc, root)),
        *(folder / "memory.limit_in_bytes" for folder in _cgroup_dirs("memory", proc, root)),
    )


def usable_cpus(quota_files: tuple[tuple[Path, Path | None], ...] | None = None) -> int:
    """How many CPUs this process may keep busy: the CPUs it may run on, fewer where a
    cgroup's CPU quota allows less (a container given half a CPU has one usable, however
    many the machine shows), at least one. An isolated grade runs a worker and its child
    per CPU: more workers than that only take turns, each round trip slower."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere, every CPU
    count = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    for quota_file, period_file in cpu_quota_files() if quota_files is None else quota_files:
        try:
            words = quota_file.read_text(encoding="ascii").split()
            if period_file is not None:
                words = [words[0], *period_file.read_text(encoding="ascii").split()[:1]]
            quota, period = words[0], words[1]
            if quota not in ("max", "-1"):
                count = min(count, math.floor(int(quota) / int(period)))
        except (OSError, IndexError, ValueError, ZeroDivisionError):
            continue
    return max(1, count)


def memory_limit(limit_files: tuple[Path, ...] | None = None) -> int | None:
    """The fewest bytes any of this process's cgroups may use (v2's ``memory.max``, v1's
    limit), or None where none states one (``max``; v1's "unlimited" is near 2**63)."""
    limits = []
    for limit_file in memory_limit_files() if limit_files is None else limit_files:
        try:
            limit = int(limit_file.read_text(encoding="ascii").split()[0])
        except (OSError, IndexError, ValueError):  # absent, or "max"
            continue
        if 0 < limit < 2**62:
            limits.append(limit)
    return min(limits, default=None)


def usable_workers(
    quota_files: tuple[tuple[Path, Path | None], ...] | None = None,
    limit_files: tuple[Path, ...] | None = None,
) -> int:
    """How many workers a grade may run at once: one per usable CPU (:func:`usable_cpus`),
    fewer where the cgroup's memory would not hold them (:data:`WORKER_MEMORY` each), at
    least one. A CPU and its memory are separate settings of a Gradescope assignment: four
    CPUs beside the default 768 MB hold three workers, where a fourth would have the grade
    killed and the submission given no result."""
    limit = memory_limit(limit_files)
    cpus = usable_cpus(quota_files)
    return max(1, cpus if limit is None else min(cpus, limit // WORKER_MEMORY))


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
