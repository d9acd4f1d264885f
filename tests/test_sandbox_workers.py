"""A grade under sandbox users uses the CPUs it may use (issue 31).

Burying a child kills every process of its user, so two forked workers may not share
one: ``--sandbox-user A,B,C`` runs the grader's own child as A and each forked worker's
children as one of B and C, claimed by a lock for the worker's life. How many workers a
grade starts by default is how many CPUs its process may keep busy, a cgroup's quota
counted (a Gradescope autograder gets half a CPU unless its settings give more), fewer
where the cgroup's memory limit would not hold them (an assignment's CPUs and memory
are set apart: four CPUs beside the default 768 MB hold three workers). The
end-to-end run, as root with ``setup.sh``'s users, is in
``tests/test_grading_gradescope.py``: two workers, a child as each of three users, none
able to stop another's, and a report the same as one process gives.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from harness.isolation import IsolatedSession, Limits
from harness.isolation.sandbox import (
    WORKER_MEMORY,
    SandboxError,
    SandboxUser,
    cpu_quota_files,
    memory_limit,
    memory_limit_files,
    sandbox_users,
    usable_cpus,
    usable_workers,
)

NOBODY = SandboxUser("nobody", 65534, 65534)
ROOT = Path(__file__).resolve().parents[1]


def _quota(tmp_path: Path, text: str, period: str | None = None) -> tuple[
    tuple[Path, Path | None], ...
]:
    quota = tmp_path / "quota"
    quota.write_text(text)
    if period is None:
        return ((quota, None),)
    period_file = tmp_path / "period"
    period_file.write_text(period)
    return ((quota, period_file),)


def test_usable_cpus_counts_the_cgroups_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert usable_cpus(_quota(tmp_path, "50000 100000\n")) == 1  # half a CPU: one worker
    assert usable_cpus(_quota(tmp_path, "150000 100000\n")) == 1
    assert usable_cpus(_quota(tmp_path, "200000 100000\n")) == min(affinity, 2)
    assert usable_cpus(_quota(tmp_path, "max 100000\n")) == affinity
    assert usable_cpus(_quota(tmp_path, "50000\n", "100000\n")) == 1  # cgroup v1
    assert usable_cpus(_quota(tmp_path, "-1\n", "100000\n")) == affinity
    assert usable_cpus(((tmp_path / "absent", None),)) == affinity
    assert usable_cpus(_quota(tmp_path, "garbage\n")) == affinity


def test_usable_cpus_where_the_system_has_no_affinity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # macOS has no sched_getaffinity: every CPU counts, the quota still caps
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert usable_cpus(((tmp_path / "absent", None),)) == 8
    assert usable_cpus(_quota(tmp_path, "300000 100000\n")) == 3
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cpus(((tmp_path / "absent", None),)) == 1


def test_usable_workers_are_as_many_as_the_memory_limit_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    four_cpus = _quota(tmp_path, "400000 100000\n")
    limit = tmp_path / "memory.max"

    def workers(text: str) -> int:
        limit.write_text(text)
        return usable_workers(four_cpus, (limit,))

    mib = 1024**2
    assert workers(f"{768 * mib}\n") == 3  # Gradescope's default memory beside four CPUs
    assert workers(f"{512 * mib}\n") == 2
    assert workers(f"{100 * mib}\n") == 1  # never none
    assert workers(f"{64 * 1024 * mib}\n") == 4  # the CPUs bound it
    assert workers("max\n") == 4  # cgroup v2 without a limit
    assert workers("9223372036854771712\n") == 4  # cgroup v1's "unlimited"
    assert workers("garbage\n") == 4
    assert usable_workers(four_cpus, (tmp_path / "absent",)) == 4
    # v2's file first; where it is absent, v1's
    v1 = tmp_path / "memory.limit_in_bytes"
    v1.write_text(f"{2 * WORKER_MEMORY}\n")
    assert memory_limit((tmp_path / "absent", v1)) == 2 * WORKER_MEMORY
    assert usable_workers(four_cpus, (tmp_path / "absent", v1)) == 2


def test_sandbox_users_are_checked_and_never_named_twice() -> None:
    if os.geteuid() != 0:
        with pytest.raises(SandboxError, match="needs a grader running as root"):
            sandbox_users("nobody")
        return
    names = [entry.pw_name for entry in pwd.getpwall() if entry.pw_uid != 0][:2]
    assert [u.name for u in sandbox_users(",".join(names))] == names
    with pytest.raises(SandboxError, match="named twice"):
        sandbox_users(f"{names[0]},{names[0]}")
    with pytest.raises(SandboxError, match="an empty name"):
        sandbox_users(f"{names[0]},")
    with pytest.raises(SandboxError, match="no user"):
        sandbox_users(f"{names[0]},mmspec-no-such-user")
    with pytest.raises(SandboxError, match="is root"):
        sandbox_users(f"{names[0]},root")


def test_forked_workers_are_as_many_as_the_worker_users() -> None:
    session = IsolatedSession.__new__(IsolatedSession)  # only its limits are read
    session.limits = Limits()
    assert session.workers(4) == 4  # no sandbox: every worker runs a child of its own
    session.limits = Limits(sandbox=NOBODY)
    assert session.workers(4) == 1  # one user: one process, as before
    session.limits = Limits(sandbox=NOBODY, worker_sandboxes=(NOBODY, NOBODY))
    assert session.workers(4) == 2
    assert session.workers(1) == 1


def test_each_forked_worker_claims_a_worker_user_of_its_own(tmp_path: Path) -> None:
    """Two processes claim two different users; a third finds none free until one of
    them ends (the system drops its lock), and never the grader's own user."""
    first = SandboxUser("first", 1001, 1001)
    second = SandboxUser("second", 1002, 1002)
    session = IsolatedSession.__new__(IsolatedSession)
    session.limits = Limits(sandbox=NOBODY, worker_sandboxes=(first, second))
    session._folder = tmp_path
    session._claim = None
    names_read, names_write = os.pipe()
    release_read, release_write = os.pipe()
    holders = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:  # a worker: claim, say which, hold it until released
            claimed = session._claim_worker_user()
            os.write(names_write, (claimed.name if claimed else "none").encode() + b"\n")
            os.read(release_read, 1)
            os._exit(0)
        holders.append(pid)
    said = b""
    while said.count(b"\n") < 2:
        said += os.read(names_read, 64)
    assert sorted(said.decode().split()) == ["first", "second"], said
    assert session._claim_worker_user() is None  # both held: nothing free
    os.write(release_write, b"xx")  # both end, and their locks with them
    for pid in holders:
        os.waitpid(pid, 0)
    claimed = session._claim_worker_user()
    assert claimed is not None and claimed.name == "first"
    for fd in (names_read, names_write, release_read, release_write):
        os.close(fd)


def test_the_grader_says_when_a_sandbox_user_may_read_the_answer_key(tmp_path: Path) -> None:
    """From a checkout the reference and the models are everyone's to read, so the grade
    warns (a submission graded as the sandbox user could import the reference); once
    they are root's alone, as the bundle's setup.sh makes them, it does not."""
    from harness.isolation.sandbox import ANSWER_KEY, answer_key_open_to

    for name in ANSWER_KEY:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# the answer key\n")
        path.chmod(0o644)
    for folder in ("reference", "properties", "properties/models"):
        (tmp_path / folder).chmod(0o755)
    assert answer_key_open_to(NOBODY, tmp_path) == list(ANSWER_KEY)
    (tmp_path / "reference").chmod(0o700)  # setup.sh: chmod -R go-rwx reference ...
    (tmp_path / "properties" / "models").chmod(0o700)
    (tmp_path / "properties" / "oracles.py").chmod(0o600)
    assert answer_key_open_to(NOBODY, tmp_path) == []
    # its own files are its own to read, whatever the others may
    owner = SandboxUser("owner", os.getuid(), os.getgid())
    assert answer_key_open_to(owner, tmp_path) == list(ANSWER_KEY)


def test_a_limit_binds_from_the_processs_own_cgroup_or_any_above_it(tmp_path: Path) -> None:
    """Where the cgroup mount is not the container's own (a host, cgroup v1 without a
    namespace), the limit sits in the folder /proc/self/cgroup names, or above it."""
    proc, root = tmp_path / "cgroup", tmp_path / "fs"
    proc.write_text("5:cpu,cpuacct:/grades/one\n4:memory:/grades/one\n0::/grades/one\n")
    for folder in ("memory/grades/one", "memory/grades", "cpu/grades/one", "grades/one"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "memory/grades/one/memory.limit_in_bytes").write_text("9223372036854771712\n")
    (root / "memory/grades/memory.limit_in_bytes").write_text(f"{WORKER_MEMORY}\n")
    (root / "grades/one/memory.max").write_text("max\n")
    assert memory_limit(memory_limit_files(proc, root)) == WORKER_MEMORY  # the one above
    (root / "grades/one/memory.max").write_text(f"{WORKER_MEMORY // 2}\n")
    assert memory_limit(memory_limit_files(proc, root)) == WORKER_MEMORY // 2  # the least
    (root / "cpu/grades/one/cpu.cfs_quota_us").write_text("50000\n")
    (root / "cpu/grades/one/cpu.cfs_period_us").write_text("100000\n")
    files = cpu_quota_files(proc, root)
    assert (root / "grades/one/cpu.max", None) == files[0]
    assert usable_cpus(files) == 1
    # a path that climbs out of the mount is not followed
    proc.write_text("4:memory:/../../etc\n")
    assert all(root in f.parents for f in memory_limit_files(proc, root))


#: How to make a cgroup that limits memory or CPU time: v1's folder and file, then v2's.
_LIMITS = {
    "memory": (("memory", "memory.limit_in_bytes", "tasks"), ("", "memory.max", "cgroup.procs")),
    "cpu": (("cpu", "cpu.cfs_quota_us", "tasks"), ("", "cpu.max", "cgroup.procs")),
}


def _cgroup(kind: str, values: tuple[str, str]) -> tuple[Path, Path] | None:
    """A new cgroup whose ``kind`` is limited to ``values`` (v1's, v2's): its folder and
    the file a process joins it by; None where this machine lets no one make one."""
    name = f"mmspec-test-{os.getpid()}"
    for (mount, limit_name, join), value in zip(_LIMITS[kind], values, strict=True):
        folder = Path("/sys/fs/cgroup") / mount / name
        try:
            folder.mkdir()
        except OSError:
            continue
        try:
            (folder / limit_name).write_text(value)
            return folder, folder / join
        except OSError:
            folder.rmdir()
    return None


def _default_jobs_in(made: tuple[Path, Path] | None) -> str:
    """``grade --help`` as a process of the cgroup ``made`` shows it, on one line."""
    if made is None:
        pytest.skip("no cgroup can be made here (needs root and a writable cgroup fs)")
    folder, join = made
    try:
        shown = subprocess.run(
            ["sh", "-c", f'echo $$ > {join} && exec "$0" -m properties grade --help',
             sys.executable],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout
    finally:
        folder.rmdir()
    return " ".join(shown.split())


def test_from_outside_a_grade_in_a_memory_limited_cgroup_defaults_to_fewer_workers() -> None:
    """The trial as an instructor's container makes it: ``grade --help``, run by a
    process of a cgroup whose memory holds one worker, says its default is one."""
    limit = str(WORKER_MEMORY + WORKER_MEMORY // 2)
    shown = _default_jobs_in(_cgroup("memory", (limit, limit)))
    assert "its memory limit would not hold them, here 1;" in shown


def test_from_outside_a_grade_in_a_cgroup_given_half_a_cpu_defaults_to_one_worker() -> None:
    """The same with half a CPU (Gradescope's default), the quota set on the process's
    own cgroup rather than the root one a container shows."""
    shown = _default_jobs_in(_cgroup("cpu", ("50000", "50000 100000")))
    assert "here 1;" in shown
