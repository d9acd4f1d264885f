"""A grade under sandbox users uses the CPUs it may use (issue 31).

Burying a child kills every process of its user, so two forked workers may not share
one: ``--sandbox-user A,B,C`` runs the grader's own child as A and each forked worker's
children as one of B and C, claimed by a lock for the worker's life. How many workers a
grade starts by default is how many CPUs its process may keep busy, a cgroup's quota
counted (a Gradescope autograder gets half a CPU unless its settings give more). The
end-to-end run, as root with ``setup.sh``'s users, is in
``tests/test_grading_gradescope.py``: two workers, a child as each of three users, none
able to stop another's, and a report the same as one process gives.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from harness.isolation import IsolatedSession, Limits
from harness.isolation.sandbox import SandboxError, SandboxUser, sandbox_users, usable_cpus

NOBODY = SandboxUser("nobody", 65534, 65534)


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
