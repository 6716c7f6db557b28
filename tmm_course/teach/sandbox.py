"""Run one submission's process where it cannot reach anything but its own folder, on a plain
Linux machine (no Docker needed).

As root, each job slot has its own unprivileged user (``tmm-grade-<slot>``): the process runs as
that user, in a new network namespace with only loopback, a private ``/tmp``, the inbox and
the reference notebooks hidden, under limits on
memory, CPU time and file size, in an empty folder it owns; afterwards every process of that user
is killed, so nothing it started outlives it. Without root it runs as the grader's own user
with the same limits and process-group kill, and says it is not isolated.
"""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

USER_PREFIX = "tmm-grade-"


@dataclass(frozen=True)
class Limits:
    """What one submission may use."""

    seconds: float = 300.0  # wall clock, the whole run
    memory_bytes: int = 12 * 2**30  # address space of each process (torch maps a lot)
    file_bytes: int = 256 * 2**20  # the largest file it may write


@dataclass(frozen=True)
class Outcome:
    """How the process ended."""

    returncode: int | None  # None: killed at the wall-clock limit
    seconds: float
    isolated: bool


def isolation_available() -> bool:
    """Root, with setpriv, unshare and ip: per-slot users, no network but loopback, a private
    /tmp."""
    tools = ("setpriv", "unshare", "ip")
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in tools)


def slot_user(slot: int) -> pwd.struct_passwd:
    """The unprivileged user of job slot ``slot``, created (no home, no shell) if missing."""
    name = f"{USER_PREFIX}{slot}"
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
            timeout=30,
        )
        return pwd.getpwnam(name)


def _blocking(path: Path) -> tuple[Path, str] | None:
    """The highest folder above ``path`` that other users cannot enter, and the name of its
    child on the way to ``path`` (None if every folder on the way is open)."""
    path = path.resolve()
    for parent in reversed(path.parents):
        if parent != path and not os.stat(parent).st_mode & 0o001:
            rest = path.relative_to(parent).parts
            return (parent, rest[0]) if rest else None
    return None


def _mount_script(hide: list[Path], reach: list[Path], holder: Path) -> str:
    """Shell run as root in the new mount namespace before dropping to the sandbox user: a
    private /tmp (what it runs keeps its way in if it lives under /tmp: ``holder``, a folder
    only root may enter, keeps the host's /tmp reachable for that); an empty folder over each
    of ``hide``; and, where a folder on the way to one of ``reach`` (the Python it runs) is
    closed to other users, a view of that folder holding only the way through."""
    steps = ["ip link set lo up"]  # the kernel and its client talk over loopback only
    steps.append(f"mount --bind /tmp '{holder}'")
    steps.append("mount -t tmpfs -o size=256m,mode=1777 tmpfs /tmp")
    tmp = Path("/tmp")
    under_tmp = sorted(
        {p.resolve().relative_to(tmp).parts[0] for p in reach if tmp in p.resolve().parents}
    )
    for top in under_tmp:
        steps.append(f"mkdir -p '/tmp/{top}' && mount --rbind '{holder}/{top}' '/tmp/{top}'")
    for folder in hide:  # what lies under /tmp and was not let back in is hidden already
        parts = folder.resolve().relative_to(tmp).parts if tmp in folder.resolve().parents else ()
        if not parts or parts[0] in under_tmp:
            steps.append(f"mount -t tmpfs -o size=1m,mode=0755 tmpfs '{folder}'")
    views: dict[Path, set[str]] = {}
    for path in reach:
        if (block := _blocking(path)) is not None:
            views.setdefault(block[0], set()).add(block[1])
    for index, (closed, children) in enumerate(sorted(views.items())):
        view = f"/tmp/.view{index}"
        steps.append(f"mkdir -p {view} && chmod 0755 {view}")
        for child in sorted(children):
            way = f"{view}/{child}"
            steps.append(f"mkdir -p '{way}' && mount --bind '{closed}/{child}' '{way}'")
        steps.append(f"mount --rbind {view} '{closed}'")
    steps.append(f"umount -l '{holder}'")
    return " && ".join(steps) + ' && exec "$@"'


def _limits(limits: Limits):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        cpu = int(limits.seconds * 4) + 60  # several threads may run at once
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _kill_everything(user: pwd.struct_passwd | None, group: int) -> None:
    """Every process the run started: by user when isolated (detached ones too), else by group."""
    for _ in range(50):
        if user is not None:
            alive = subprocess.run(["pkill", "-KILL", "-u", str(user.pw_uid)], timeout=10)
            if alive.returncode == 1:  # no process matched
                return
        else:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                return
        time.sleep(0.1)


def run(
    command: list[str],
    folder: Path,
    env: dict[str, str],
    limits: Limits,
    slot: int,
    log: Path,
    hide: list[Path] = (),
    extra_reach: list[Path] = (),
) -> Outcome:
    """Run ``command`` in ``folder`` (made the sandbox user's), output to ``log``; always
    returns, within ``limits.seconds`` plus the time to kill what it left behind. ``hide``:
    folders the sandbox sees empty (the inbox, the reference notebooks); ``extra_reach``: what
    it must still reach besides this Python (the course package it imports)."""
    isolated = isolation_available()
    user = slot_user(slot) if isolated else None
    if user is not None:
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(folder, 0o700)
        reach = [Path(sys.executable), Path(sys.base_prefix), Path(sys.prefix), *extra_reach]
        holder = folder.parent / ".host-tmp"
        holder.mkdir(mode=0o700, exist_ok=True)
        command = [
            "unshare", "--net", "--mount", "--",
            "sh", "-c", _mount_script(list(hide), reach, holder), "sh",
            "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
            "--inh-caps=-all", "--",
            *command,
        ]  # fmt: skip
    start = time.monotonic()
    with log.open("wb") as out:
        child = subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_limits(limits),
        )
        try:
            code: int | None = child.wait(timeout=limits.seconds)
        except subprocess.TimeoutExpired:
            code = None
        _kill_everything(user, child.pid)
        if code is None:
            child.wait(timeout=30)
    return Outcome(code, time.monotonic() - start, isolated)
