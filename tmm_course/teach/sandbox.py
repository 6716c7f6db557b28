"""Where a submission's code runs: a bubblewrap sandbox, a fresh user and a cgroup of its own.

As root, with ``bwrap`` (Debian's ``bubblewrap``) installed, each worker gets:

- an allow-list view of the file system, read-only: ``/usr``, the Python it runs, its
  packages (the venv) and a copy of the course package; nothing else of the host (no inbox,
  no reference notebook, no classmates, no ``grades.csv``, no checkout or ``.git``);
- private, size-capped tmpfs mounts for ``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock`` and
  its working folder (the disk quota), gone with its mount namespace;
- new PID, IPC, network (loopback only), UTS and mount namespaces; bwrap dies with the judge,
  and when the namespace's first process dies the kernel kills every process in it;
- a user id drawn at random for this submission of this run (no other process has it), so two
  graders on one host, or two submissions, never share one;
- a cgroup of its own for memory, process count and CPU bandwidth (cgroup v2, or the v1
  memory, pids and cpu controllers), under a name drawn fresh for each worker start, the whole
  group killed at the end (``cgroup.kill`` where cgroup v2 is mounted). Where this host has a
  writable controller, a cgroup that cannot be made or limited is an error
  (:class:`CgroupError`: the worker does not start); only without a writable cgroup file
  system do per-process limits apply (``RLIMIT_AS``, ``RLIMIT_NPROC`` of its own user,
  ``RLIMIT_CPU``) and the PID namespace's kill, and the grader says so.

:func:`unisolated` runs the worker as the grader's own user instead (``--no-isolation``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
SITE = "/opt/tmm-site"
HOME = "/home/student"
UID_RANGE = (1 << 30, (1 << 31) - (1 << 20))


@dataclass(frozen=True)
class Limits:
    """What one submission may use."""

    seconds: float = 300.0  # wall clock, the whole submission
    memory_bytes: int = 6 * 2**30  # all its processes together (per process without cgroups)
    processes: int = 256
    disk_bytes: int = 256 * 2**20  # its working folder; /tmp and the others 64 MiB each
    output_bytes: int = 2**20  # printed output the judge accepts before it stops the worker
    cpus: float = 2.0  # CPU bandwidth (cgroup cpu.max or cfs quota): with ``seconds``, CPU time


def problem() -> str | None:
    """Why full isolation is not possible here (None: it is)."""
    if os.geteuid() != 0:
        return "the grader is not running as root"
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    return None


def fresh_uid() -> int:
    """A user id no process on this host has, drawn at random."""
    taken = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    taken.update(int(v) for v in line.split()[1:])
    while True:
        uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])
        if uid not in taken:
            return uid


def _own_path(controller: str) -> str | None:
    """This process's cgroup path for ``controller`` ("" for the cgroup v2 line)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (controller == "" and names == "") or controller in names.split(","):
                return path
    return None


class CgroupError(OSError):
    """A cgroup this host can make could not be made or limited: the worker must not start."""


def cgroup_layout() -> dict[str, Path]:
    """Where this process may make cgroups, by controller ("" for the kill file's unified
    hierarchy): the folders that exist and are writable; empty where none is."""
    if (CGROUP / "cgroup.controllers").is_file():  # the unified hierarchy alone
        if not _writable(CGROUP):
            return {}
        offered = (CGROUP / "cgroup.controllers").read_text().split()
        base = CGROUP / "tmm-grade"
        return {c: base for c in ("memory", "pids", "cpu", "") if c in offered or c == ""}
    found = {}
    for controller in ("memory", "pids", "cpu", ""):
        own = _own_path(controller)
        root = CGROUP / (controller or "unified")
        if own is not None and root.is_dir() and _writable(root / own.lstrip("/")):
            found[controller] = root / own.lstrip("/")
    return found


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK) and not os.statvfs(folder).f_flag & os.ST_RDONLY


class Cgroup:
    """One worker's cgroups, under a name no other worker has (the caller draws it): limits
    written on creation, every process killed at the end. Each controller this host offers
    (:func:`cgroup_layout`) must be made and limited, or :class:`CgroupError` is raised and
    nothing is left behind: caps are never lost in silence."""

    def __init__(self, name: str, limits: Limits) -> None:
        self.folders: list[Path] = []
        self.kill_file: Path | None = None
        self.limited: list[str] = []
        layout = cgroup_layout()
        quota = int(limits.cpus * 100_000)
        try:
            if (CGROUP / "cgroup.controllers").is_file() and layout:
                folder = self._make(CGROUP / "tmm-grade" / name, v2_root=CGROUP)
                settings = {
                    "memory": [("memory.max", limits.memory_bytes), ("memory.swap.max", 0)],
                    "pids": [("pids.max", limits.processes)],
                    "cpu": [("cpu.max", f"{quota} 100000")],
                    "": [],
                }
                for controller in layout:
                    for key, value in settings[controller]:
                        optional = key == "memory.swap.max"  # swap may be off altogether
                        self._write(folder, key, value, "" if optional else controller, optional)
                self.kill_file = folder / "cgroup.kill"
                return
            settings = {
                "memory": [("memory.limit_in_bytes", limits.memory_bytes),
                           ("memory.memsw.limit_in_bytes", limits.memory_bytes)],
                "pids": [("pids.max", limits.processes)],
                "cpu": [("cpu.cfs_period_us", 100_000), ("cpu.cfs_quota_us", quota)],
                "": [],
            }  # fmt: skip
            for controller, parent in layout.items():
                folder = self._make(parent / f"tmm-grade-{name}")
                for key, value in settings[controller]:
                    optional = key == "memory.memsw.limit_in_bytes"  # swap accounting may be off
                    self._write(folder, key, value, "" if optional else controller, optional)
                if controller == "" and (folder / "cgroup.kill").exists():
                    self.kill_file = folder / "cgroup.kill"
        except OSError as error:
            self.kill()
            raise CgroupError(f"cannot make the cgroup {name}: {error}") from None

    def _make(self, folder: Path, v2_root: Path | None = None) -> Path:
        if v2_root is not None:
            with contextlib.suppress(OSError):
                (v2_root / "cgroup.subtree_control").write_text("+memory +pids +cpu")
            folder.parent.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):
                (folder.parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
        folder.mkdir()  # never exist_ok: a folder already there is another worker's
        self.folders.append(folder)
        return folder

    def _write(
        self, folder: Path, key: str, value: object, what: str, optional: bool = False
    ) -> None:
        try:
            (folder / key).write_text(str(value))
        except OSError:
            if optional:
                return
            raise
        if what and what not in self.limited:
            self.limited.append(what)

    def enter(self) -> None:
        """Move the calling process in (run in the child before it executes bwrap)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                (folder / "cgroup.procs").write_text("0")

    def kill(self) -> None:
        """Kill every process in the cgroups, then remove them."""
        if self.kill_file is not None:
            with contextlib.suppress(OSError):
                self.kill_file.write_text("1")
        for _ in range(400):  # up to 20 s for the last of them to be gone
            alive = False
            for folder in self.folders:
                with contextlib.suppress(OSError, ValueError):
                    for pid in (folder / "cgroup.procs").read_text().split():
                        alive = True
                        if self.kill_file is None:  # no cgroup.kill: one by one
                            with contextlib.suppress(OSError):
                                os.kill(int(pid), signal.SIGKILL)
            if not alive:
                break
            time.sleep(0.05)
        for folder in reversed(self.folders):
            for _ in range(20):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def binds() -> list[Path]:
    """What the worker reads: the Python it runs, its packages."""
    found = []
    for path in (
        Path(sys.base_prefix),
        Path(sys.prefix),
        Path(sys.executable).resolve().parent.parent,
    ):
        path = path.resolve()
        if path != Path("/usr") and Path("/usr") not in path.parents and path not in found:
            found.append(path)
    return [p for p in found if not any(q in p.parents for q in found)]


def bwrap_command(
    site: Path, uid: int, limits: Limits, worker: list[str], gpu: str | None = None
) -> list[str]:
    """The bwrap command line that runs ``worker`` as ``uid`` in the allow-list view."""
    command = [
        "bwrap",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--cap-add",
        "CAP_SETUID",
        "--cap-add",
        "CAP_SETGID",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in ("bin", "lib", "lib64", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            command += ["--ro-bind", str(path), f"/{name}"]
    command += ["--proc", "/proc", "--dev", "/dev"]
    # the private scratch folders first: a Python that lives under one of them (a checkout's
    # .venv in /tmp, say) is bound on top of it below instead of being hidden by it
    scratch = {"/tmp": 64 * 2**20, "/var/tmp": 64 * 2**20, "/dev/shm": 64 * 2**20,
               "/run/lock": 2**20, HOME: limits.disk_bytes}  # fmt: skip
    for folder, size in scratch.items():
        command += ["--size", str(size), "--perms", "1777", "--tmpfs", folder]
    made: set[Path] = {Path(folder) for folder in scratch}
    for bind in [*binds(), Path(SITE)]:
        for parent in reversed(bind.parents):
            if parent != Path("/") and parent not in made:
                command += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
    for bind in binds():
        command += ["--ro-bind", str(bind), str(bind)]
    command += ["--ro-bind", str(site), SITE]
    devices = sorted(Path("/dev").glob("nvidia*"))
    for device in devices:
        command += ["--dev-bind", str(device), str(device)]
    if devices:  # the CUDA driver reads the GPU's topology there
        command += ["--ro-bind", "/sys", "/sys"]
    command += ["--chdir", HOME]
    for key, value in worker_environment(SITE, HOME, gpu).items():
        command += ["--setenv", key, value]
    command += [
        "--",
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
        *worker,
    ]
    return command


def worker_environment(site: str, home: str, gpu: str | None = None) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "USER": "student",
        "LOGNAME": "student",
        "TMPDIR": "/tmp",
        "PYTHONPATH": site,
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLCONFIGDIR": f"{home}/.matplotlib",
        "TRITON_CACHE_DIR": f"{home}/.triton",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for name in ("TMM_BACKEND", "CUDA_VISIBLE_DEVICES"):
        if name in os.environ:
            env[name] = os.environ[name]
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def gpus() -> list[str]:
    """The GPUs a worker may be given, one each: ``CUDA_VISIBLE_DEVICES`` where it is set, else
    every ``/dev/nvidiaN`` of this host."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    found = [p.name.removeprefix("nvidia") for p in Path("/dev").glob("nvidia[0-9]*")]
    return sorted(found, key=int)


def _rlimits(limits: Limits, per_process_memory: bool, nproc: bool) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(limits.seconds * 2) + 30
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.disk_bytes, limits.disk_bytes))
    if per_process_memory:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if nproc:  # counted per user: the fresh uid's processes alone
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))


@dataclass
class Running:
    """A started worker: its process, the judge's ends of the channel, how to end it."""

    process: subprocess.Popen
    to_worker: int
    from_worker: int
    cgroup: Cgroup | None
    isolated: bool
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: bool = False
    closed: bool = False

    def stop(self) -> None:
        """Kill everything the worker started (safe from any thread; the channel stays open, so
        the thread that reads it sees the end of the stream)."""
        with self.lock:
            if self.stopped:
                return
            self.stopped = True
        with contextlib.suppress(OSError):
            if self.isolated:
                self.process.kill()  # bwrap: its namespace's processes die with its init
            else:
                os.killpg(self.process.pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    def end(self) -> None:
        """Stop the worker and close the channel, once; only the thread that owns the channel
        calls this (a closed descriptor's number may be reused at once)."""
        self.stop()
        with self.lock:
            if self.closed:
                return
            self.closed = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)
        for fd in (self.to_worker, self.from_worker):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.process.stdout is not None:
            with contextlib.suppress(OSError, ValueError):
                self.process.stdout.close()


_noted: set[str] = set()


def _note_fallback(memory: bool, processes: bool, cpu: bool) -> None:
    """Say once per run which whole-submission caps fell back to per-process limits."""
    for what, fell in (("memory", memory), ("process count", processes), ("CPU", cpu)):
        if fell and what not in _noted:
            _noted.add(what)
            print(f"note: no writable cgroup for {what}: capped per process (RLIMIT) instead, "
                  "and everything killed with the PID namespace", file=sys.stderr)  # fmt: skip


def start(site: Path, limits: Limits, name: str, isolated: bool, gpu: str | None = None) -> Running:
    """Start a worker (isolated: bwrap as a fresh user in a cgroup of its own, named ``name``
    and a random suffix, so a restarted worker never meets its predecessor's). ``gpu``: the one
    GPU it sees (``CUDA_VISIBLE_DEVICES``). Raises :class:`CgroupError` where the host's cgroups
    could not cap it."""
    cgroup = None
    if isolated:
        for attempt in range(3):
            try:
                cgroup = Cgroup(f"{name}-{secrets.token_hex(4)}", limits)
                break
            except CgroupError:
                if attempt == 2:
                    raise
    judge_read, worker_write = os.pipe()
    worker_read, judge_write = os.pipe()
    worker = [sys.executable, "-m", "tmm_course.teach.worker", str(worker_read), str(worker_write)]
    if isolated:
        assert cgroup is not None
        command = bwrap_command(site, fresh_uid(), limits, worker, gpu)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        memory_cap = "memory" not in cgroup.limited
        nproc = "pids" not in cgroup.limited
        _note_fallback(memory_cap, nproc, "cpu" not in cgroup.limited)

        def prepare() -> None:
            cgroup.enter()
            _rlimits(limits, memory_cap, nproc)
    else:
        command = worker
        env = worker_environment(str(site), str(site.parent / "home"), gpu)
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")

        def prepare() -> None:
            _rlimits(limits, True, False)

    try:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(worker_read, worker_write),
            start_new_session=True,
            preexec_fn=prepare,
            cwd="/",
        )
    except BaseException:
        for fd in (judge_read, worker_write, worker_read, judge_write):
            os.close(fd)
        if cgroup is not None:
            cgroup.kill()
        raise
    os.close(worker_read)
    os.close(worker_write)
    os.set_blocking(judge_write, False)  # every write has a deadline (wire.send)
    return Running(process, judge_write, judge_read, cgroup, isolated)
