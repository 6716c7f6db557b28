"""Attacks on the grader, written as a motivated student would: forgeries of every kind graded
by two graders running at once on this host, and probes of the sandbox run straight in a worker.

Needs root and bubblewrap (CI has both, and TMM_REQUIRE_ISOLATION=1 makes them mandatory
there); skipped with the reason otherwise. No forgery may pass, no probe may reach anything,
every inbox entry gets its rows, both graders finish in time and honest unusual work passes: a
verdict is what the submission's kernels compute when the judge replays them.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT
from test_grade import HOMEWORK, exercise, solved, student, with_exercise

from tmm_course.teach import clients, grade, sandbox, wire
from tmm_course.teach.safe_io import entry_key, entry_name

pytestmark = pytest.mark.skipif(
    sandbox.problem() is not None and os.environ.get("TMM_REQUIRE_ISOLATION") != "1",
    reason=f"the attack suite needs isolation: {sandbox.problem()}",
)
SLOW_LIMIT = 20  # seconds per submission for the inbox of endless and resource attacks
FAST_LIMIT = 150
HOSTILE_LIMIT = 120  # honest exercises beside the attacks: room on a busy machine

KERNEL = """
@triton.jit
def copy_kernel(x_ptr, out_ptr, M, N, sxm, sxn, som, son, BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * sxm + offs_n[None, :] * sxn, mask=mask)
    tl.store(out_ptr + offs_n[None, :] * som + offs_m[:, None] * son, tile, mask=mask)
"""
CORRECT = (
    KERNEL
    + """
def transpose(x, out):
    M, N = x.shape
    copy_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](x, out, M, N, *x.stride(),
                                                          *out.stride(), BLOCK=32)
"""
)


def forge(body: str) -> dict:
    """The student copy with Part 3 (``transpose``) answered by ``body``."""
    return with_exercise(student(), "transpose", textwrap.dedent(body))


# forgeries: none may pass (they fail on what their kernels compute, or are refused)
FORGERIES = {
    "decoy_kernel_torch_does_it": """
        @triton.jit
        def decoy(x_ptr):
            pass
        def transpose(x, out):
            decoy[(1,)](x)
            out.copy_(x.t())
        """,
    "alias_import": """
        import torch as T
        def transpose(x, out):
            T.Tensor.copy_(out, T.transpose(x, 0, 1))
        """,
    "from_import_alias": """
        from torch import transpose as flip
        def transpose(x, out):
            flip(x, 0, 1)
        """,
    "exec_base64": """
        import base64
        exec(base64.b64decode(b'ZGVmIHRyYW5zcG9zZSh4LCBvdXQpOgogICAgb3V0LmNvcHlfKHgudCgpKQo='))
        """,
    "eval_chr": """
        transpose = eval(''.join(map(chr, [108, 97, 109, 98, 100, 97, 32, 120, 44, 32, 111, 117,
            116, 58, 32, 111, 117, 116, 46, 99, 111, 112, 121, 95, 40, 120, 46, 116, 40, 41, 41])))
        """,
    "getattr_built_strings": """
        def transpose(x, out):
            getattr(out, 'co' + 'py_')(getattr(x, chr(116))())
        """,
    "builtins_import": """
        def transpose(x, out):
            t = __builtins__['__import__']('torch')
            out.copy_(t.t(x))
        """,
    "ipython_bang": """
        !cp /solutions.ipynb /tmp/
        def transpose(x, out):
            raise NotImplementedError
        """,
    "get_ipython_run_cell": """
        get_ipython().run_cell('def transpose(x, out):\\n    out.copy_(x.t())')
        """,
    "recorder_called_directly": """
        __tmm_record('transpose', __tmm_checks['check_transpose'](lambda x, out: out.copy_(x.t())))
        def transpose(x, out):
            raise NotImplementedError
        """,
    "check_functions_wrapped": """
        import tmm_course.check as C
        C.check_transpose = lambda *a, **k: C.CheckResult('transpose', True, [])
        def transpose(x, out):
            raise NotImplementedError
        """,
    "key_from_environ": """
        key = open('/proc/self/environ', 'rb').read() + open('/proc/1/environ', 'rb').read()
        def transpose(x, out):
            raise NotImplementedError
        """,
    "gc_ctypes_games": """
        import gc as G
        import ctypes
        def transpose(x, out):
            [o for o in G.get_objects() if callable(o)]
        """,
    "python_computes_the_answer": """
        def transpose(x, out):
            rows = [x[:, j] for j in range(x.shape[1])]
            staged = torch.stack(rows) * 1
            copy_kernel[(1, 1)](staged, out, 1, 1, 1, 1, 1, 1, BLOCK=32)
        """,
    "torch_inside_the_kernel": """
        @triton.jit
        def k(x_ptr, out_ptr):
            torch.ops.aten.t(x_ptr)
        def transpose(x, out):
            k[(1,)](x, out)
        """,
    "course_kernel_borrowed": """
        from tmm_course.kernels.strides import strided_copy_kernel as theirs
        def transpose(x, out):
            n, m = out.shape
            theirs[(triton.cdiv(n, 16), triton.cdiv(m, 16))](
                x, out, n, m, x.stride(1), x.stride(0), out.stride(0), out.stride(1), 16, 16)
        """,
    "reads_the_reference_and_classmates": f"""
        import os
        spy = [open({str(HOMEWORK)!r}).read(), os.listdir('..'), open('grades.csv').read()]
        def transpose(x, out):
            raise NotImplementedError
        """,
    "python_permutes_a_kernel_stores": """
        @triton.jit
        def put(out_ptr, offset, value):
            tl.store(out_ptr + offset, value)
        def transpose(x, out):
            for j, column in enumerate(list(zip(*list(x)))):
                for i, value in enumerate(column):
                    put[(1,)](out, j * out.stride(0) + i * out.stride(1), float(value))
        """,
    "parses_the_printed_tensor": """
        def transpose(x, out):
            text = str(x)
            copy_kernel[(1, 1)](x, out, 1, 1, len(text), 1, 1, 1, BLOCK=32)
        """,
    "kernel_called_without_a_grid": """
        @triton.jit
        def swap(x):
            return x.T
        @triton.jit
        def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
        def transpose(x, out):
            copy[(triton.cdiv(x.numel(), 64),)](swap(x).contiguous(), out, x.numel(), BLOCK=64)
        """,
    "kernel_from_a_container": """
        @triton.jit
        def swap(x):
            return x.T
        table = {'t': swap}
        def transpose(x, out):
            view = table['t'](x)
            copy_kernel[(1, 1)](view, out, 1, 1, 1, 1, 1, 1, BLOCK=32)
        """,
    "branches_on_values": """
        def transpose(x, out):
            if x.sum() > 0 or x:
                raise NotImplementedError
        """,
    "stops_the_grader": """
        import os, signal
        os.kill(os.getppid(), signal.SIGSTOP)
        def transpose(x, out):
            raise NotImplementedError
        """,
    "builtins_exec_in_the_kernel": """
        @triton.jit
        def k(x_ptr, out_ptr, M, N):
            tl.core.builtins.exec("import torch; torch.Tensor.copy_ = torch.Tensor.copy_")
            tl.store(out_ptr + tl.arange(0, 1), tl.load(x_ptr + tl.arange(0, 1)))
        def transpose(x, out):
            out.copy_(x.t())
            k[(1,)](x, out, *x.shape)
        """,
    "alias_hidden_behind_if_false": """
        import torch as m
        if False:
            import math as m
        @triton.jit
        def touch(x_ptr, out_ptr):
            pass
        def transpose(x, out):
            m.Tensor.copy_(out, m.transpose(x, 0, 1))
            touch[(1,)](x, out)
        """,
    "typing_operator": """
        import typing
        @triton.jit
        def touch(x_ptr, out_ptr):
            pass
        def transpose(x, out):
            typing.operator.setitem(out, slice(None), x.t())
            touch[(1,)](x, out)
        """,
    "jit_globals_in_the_kernel": """
        @triton.jit
        def k(x_ptr, out_ptr):
            triton.jit.__globals__["os"].system("true")
        def transpose(x, out):
            out.copy_(x.t())
            k[(1,)](x, out)
        """,
    "autotune_pre_hook_does_the_work": """
        @triton.autotune(configs=[triton.Config({}, pre_hook=lambda a: a["out_ptr"].copy_(
            a["x_ptr"].t()))], key=[])
        @triton.jit
        def k(x_ptr, out_ptr, M, N):
            pass
        def transpose(x, out):
            k[(1,)](x, out, *x.shape)
        """,
    "course_kernel_under_a_new_name": """
        from tmm_course.kernels.matmul import matmul_kernel
        course_kernel = matmul_kernel
        def transpose(x, out):
            eye = torch.eye(x.shape[1], dtype=x.dtype)
            course_kernel[(triton.cdiv(out.shape[0], 32), triton.cdiv(out.shape[1], 32))](
                x.t(), eye, out, out.shape[0], out.shape[1], x.shape[0] * 0 + x.shape[1],
                *x.t().stride(), *eye.stride(), *out.stride(), PRECISION="ieee", BLOCK_M=32,
                BLOCK_N=32, BLOCK_K=32)
        """,
    "python_loops_over_rows": """
        @triton.jit
        def put(out_ptr, row, values_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + row * n + offs, tl.load(values_ptr + offs, mask=offs < n),
                     mask=offs < n)
        def transpose(x, out):
            for j in range(x.shape[1]):
                column = torch.tensor([float(v) for v in x[:, j]])
                put[(1,)](out, j, column, x.shape[0], BLOCK=128)
        """,
    "answer_as_an_argument": """
        @triton.jit
        def copy(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)
        def transpose(x, out):
            answer = (x.t() * 1.0).contiguous()
            copy[(triton.cdiv(out.numel(), 64),)](answer, out, out.numel(), BLOCK=64)
        """,
    "cached_from_an_earlier_call": """
        cache = {}
        @triton.jit
        def copy(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)
        def transpose(x, out):
            key = tuple(x.shape)
            cache.setdefault(key, x.t().contiguous() + 0)
            copy[(triton.cdiv(out.numel(), 64),)](cache[key], out, out.numel(), BLOCK=64)
        """,
}
# pure Triton that is right only on what a checker's inputs would look like: must fail
INPUT_RECOGNISER = (
    KERNEL.replace(
        "    tl.store(out_ptr",
        "    old = tl.load(out_ptr + offs_n[None, :] * som + offs_m[:, None] * son, mask=mask)\n"
        "    tile = tl.where(old != old, tile, 0.0)  # right only where the output held NaN\n"
        "    tl.store(out_ptr",
    )
    + CORRECT[len(KERNEL) :]
)
HONEST_UNUSUAL = """
import math
import numpy as np
import tmm_course  # the course says so

# global memory is slow; check_result below is just a name
check_result = None


def blocks(n: int, block: int = 32) -> int:
    return math.ceil(n / block) if np.prod([n]) > 0 else 1


@triton.jit
def my_kernel(x_ptr, out_ptr, M, N, sxm, sxn, som, son, BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * sxm + offs_n[None, :] * sxn, mask=mask)
    tl.store(out_ptr + offs_n[None, :] * som + offs_m[:, None] * son, tile, mask=mask)


def transpose(x, out):
    M, N = x.shape
    assert x.dim() == 2 and out.shape == (N, M), "transpose wants x and out of x.T's shape"
    print("launching", M, N, x.stride(), out.stride())
    display(x.shape)
    grid = lambda META: (blocks(M, META["BLOCK"]), blocks(N, META["BLOCK"]))
    with torch.no_grad():
        my_kernel[grid](x, out, M, N, *x.stride(), *out.stride(), BLOCK=32)
    print(out[:2, :2])
"""
# honest work the old rules sent for review: graded on its kernels' values, each must pass
SCALED = """
@triton.jit
def scaled_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn, alpha, beta,
                  HAS_BETA: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(axis=0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(axis=1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        ks = k * BK + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * sam + ks[None, :] * sak,
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * sbk + offs_n[None, :] * sbn,
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    result = alpha * acc
    if HAS_BETA:
        result += beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(c_ptrs, result.to(c_ptr.dtype.element_ty), mask=mask)


def grid_for(M: int, N: int, block: int = 32) -> tuple[int, int]:
    return triton.cdiv(M, block), triton.cdiv(N, block)


def scaled_matmul(a, b, c, alpha, beta):
    M, K = a.shape
    N = b.shape[1]
    assert K == b.shape[0]
    alpha, beta = float(alpha), float(beta)
    scaled_kernel[grid_for(M, N)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                  alpha, beta, HAS_BETA=beta != 0, BM=32, BN=32, BK=32)
"""
HONEST = {
    "honest_unusual": ("transpose", HONEST_UNUSUAL),
    "honest_scaled": ("scaled_matmul", SCALED),
}


# a first cell that takes the worker's channel over, to answer for the cells after it
TAKEOVER = """
import sys
wire = sys.modules["tmm_course.teach.wire"]
real_send = wire.send


def send(fd, header, blobs=()):
    if header.get("ok") is False:  # every later failure (NotImplementedError) becomes a pass
        header = {"ok": True, "size": 2}
        real_send(fd, header)
        return real_send(fd, {}, [b"{}"])
    return real_send(fd, header, blobs)


wire.send = send


def transpose_v1(x, out):
    raise NotImplementedError
"""


def duplicated_ids() -> dict:
    """The exercise cell twice: a wrong copy first, a correct one after the check."""
    notebook = with_exercise(student(), "transpose", "def transpose(x, out):\n    pass\n")
    notebook["cells"].append({"cell_type": "code", "id": exercise("transpose").cell_id,
                              "metadata": {}, "execution_count": None, "outputs": [],
                              "source": CORRECT})  # fmt: skip
    return notebook


def fast_inbox(inbox: Path) -> None:
    write = lambda name, nb: (inbox / name).write_text(json.dumps(nb))
    write("correct.ipynb", solved())
    write("untouched.ipynb", student())
    for name, (part, body) in HONEST.items():
        write(f"{name}.ipynb", with_exercise(student(), part, textwrap.dedent(body)))
    write("duplicated_ids.ipynb", duplicated_ids())
    write("input_recogniser.ipynb", forge(INPUT_RECOGNISER))
    write("takeover.ipynb", with_exercise(student(), "transpose_v1", TAKEOVER))
    for name, body in FORGERIES.items():
        write(f"{name}.ipynb", forge(body))
    write('=HYPERLINK("http-evil","x").ipynb', student())
    (inbox / "corrupt.ipynb").write_text('{"cells": [ truncated')
    (inbox / "notes.txt").write_text("not a notebook")
    os.mkfifo(inbox / "fifo.ipynb")
    os.symlink("/dev/zero", inbox / "zero_link.ipynb")
    deep = inbox / "deep.ipynb"
    deep.mkdir()
    for _ in range(300):  # the grader never walks into an entry: depth costs it nothing
        deep = deep / "d"
        deep.mkdir()


SLOW = {
    "endless_print": "while True:\n    print('x' * 10000)\n",
    "endless_loop": "while True:\n    pass\n",
    "stops_itself": "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
    "refork_daemon": """
        import os, time
        if os.fork() == 0:
            os.setsid()
            while True:
                if os.fork():
                    os._exit(0)
                time.sleep(0.005)
        """,
    "memory_in_children": """
        import os, time
        for _ in range(4):
            if os.fork() == 0:
                block = bytearray(3 * 2**30)
                block[::4096] = b'x' * len(block[::4096])
                time.sleep(60)
        time.sleep(60)
        """,
    "disk_fill": """
        import os
        with open(os.path.expanduser('~/fill'), 'wb') as f:
            while True:
                f.write(b'x' * 2**20)
        """,
    "deep_tree": """
        import os
        for _ in range(3000):
            os.mkdir('d')
            os.chdir('d')
        """,
}


def slow_inbox(inbox: Path) -> None:
    for name, body in SLOW.items():
        notebook = with_exercise(student(), "transpose_v1", textwrap.dedent(body))
        (inbox / f"{name}.ipynb").write_text(json.dumps(notebook))
    (inbox / "untouched_after.ipynb").write_text(json.dumps(student()))


def _solution(name: str) -> str:
    cell_id = exercise(name).cell_id
    return next(c["source"] for c in solved()["cells"] if c.get("id") == cell_id)


# the resource and inbox attacks on the grader itself: each entry gets its rows, in time
HOSTILE = {
    # a dead pipe over the worker's read end, the judge's pipe kept open: the judge's next
    # write (a case of 100 KB, more than a pipe holds) would block forever without a deadline
    "dead_pipe": {"transpose_v1": "import os, sys\nr, w = os.pipe()\nfd = int(sys.argv[1])\n"
                  "kept = os.dup(fd)\nos.dup2(r, fd)\n" + _solution("transpose_v1")},
    # a flood stops the worker; the next exercise's worker must get caps of its own
    "flood_then_balloon": {
        "transpose_v1": "print('x' * 3 * 2**20)\n",
        "transpose_v2": textwrap.dedent("""
            import os, time
            hogs = []
            for _ in range(4):
                pid = os.fork()
                if pid == 0:
                    block = bytearray(1536 * 2**20)
                    block[::4096] = b'x' * len(block[::4096])
                    time.sleep(3)
                    os._exit(0)
                hogs.append(pid)
            raise RuntimeError(f'ends={[os.waitpid(p, 0)[1] for p in hogs]}')
            """),
    },
    "surrogates": {"transpose_v1": "raise RuntimeError('\\udcff \\ud800 caf\\xe9')\n",
                   "transpose_v2": "def transpose_v2(x, out):\n    raise ValueError('\\udfff')\n"},
    "deep_nesting": {"transpose_v1": "x = a" + ".b" * 200_000 + "\n"},
    "big_cell": {name: f"# {'x' * 70_000}\n" + _solution(name)
                 for name in ("transpose_v1", "transpose_v2")},
    "crash_then_honest": {"transpose_v1": "import ctypes\nctypes.string_at(0)\n",
                          "transpose_v2": _solution("transpose_v2")},
}  # fmt: skip


def hostile_inbox(inbox: Path) -> None:
    for name, cells in HOSTILE.items():
        notebook = student()
        for exercise_name, source in cells.items():
            notebook = with_exercise(notebook, exercise_name, source)
        (inbox / f"{name}.ipynb").write_text(json.dumps(notebook))
    for raw in (b"caf\xe9.txt", b"alice\nnotebook.txt", b"alice notebook.txt"):
        (inbox / os.fsdecode(raw)).write_text("not a notebook")


def _grader(inbox: Path, limit: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "tmm_course.teach.grade", str(inbox), "--reference",
               str(HOMEWORK), "--out", str(inbox.parent / f"{inbox.name}.csv"), "--timeout",
               str(limit), "--jobs", "2", "--memory-gib", "2", "--no-progress"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Three graders at once on this host, each with its own inbox."""
    fast, slow = tmp_path_factory.mktemp("fast"), tmp_path_factory.mktemp("slow")
    hostile = tmp_path_factory.mktemp("hostile")
    fast_inbox(fast)
    slow_inbox(slow)
    hostile_inbox(hostile)
    before = {p: grade.digest(p) for p in (fast, slow, hostile)}
    start = time.monotonic()
    limits = {fast: FAST_LIMIT, slow: SLOW_LIMIT, hostile: HOSTILE_LIMIT}
    # the runs always end: each entry within --timeout and the watchdog's grace, two at once
    # (was 280 and 400 s, figures of no limit's, which a loaded CI came near)
    bound = max(-(-len(list(inbox.iterdir())) // 2) * (limit + grade.WATCHDOG_GRACE)
                for inbox, limit in limits.items())  # fmt: skip
    runs = {inbox: _grader(inbox, limit) for inbox, limit in limits.items()}
    logs = {p: run.communicate(timeout=900)[0].decode(errors="replace") for p, run in runs.items()}
    elapsed = time.monotonic() - start
    run_ids = [re.search(r"\(run ([0-9a-f]+)\)", log).group(1) for log in logs.values()]
    rows = {}
    for inbox, run in runs.items():
        assert run.returncode == 0, logs[inbox][-3000:]
        with (inbox.parent / f"{inbox.name}.csv").open(newline="") as f:
            rows[inbox.name] = list(csv.DictReader(f))
    csv_bytes = {p: (p.parent / f"{p.name}.csv").read_bytes() for p in runs}
    time.sleep(2)  # anything left running would write now
    return {"fast": rows[fast.name], "slow": rows[slow.name], "hostile": rows[hostile.name],
            "elapsed": elapsed, "inboxes": (fast, slow, hostile), "before": before,
            "csv": csv_bytes, "runs": run_ids, "bound": bound}  # fmt: skip


def verdicts(rows, submission):
    return {r["exercise"]: r["verdict"] for r in rows if r["submission"] == submission}


def test_honest_controls_hold(graded):
    rows = graded["fast"]
    assert set(verdicts(rows, "correct.ipynb").values()) == {"pass"}
    assert set(verdicts(rows, "untouched.ipynb").values()) == {"not_implemented"}


@pytest.mark.parametrize("honest", HONEST)
def test_honest_unusual_work_is_graded_on_its_kernels_values(graded, honest):
    part = HONEST[honest][0]
    row = next(r for r in graded["fast"] if r["submission"] == f"{honest}.ipynb"
               and r["exercise"] == part)  # fmt: skip
    assert row["verdict"] == "pass", row


@pytest.mark.parametrize("forgery", [*FORGERIES, "input_recogniser", "duplicated_ids", "takeover"])
def test_no_forgery_passes(graded, forgery):
    found = verdicts(graded["fast"], f"{forgery}.ipynb")
    assert "pass" not in found.values(), found


@pytest.mark.parametrize(
    ("forgery", "code"),
    [
        ("builtins_exec_in_the_kernel", "gpu_would_reject"),
        ("jit_globals_in_the_kernel", "gpu_would_reject"),
        ("course_kernel_borrowed", "course_kernel"),
        ("course_kernel_under_a_new_name", "course_kernel"),
        ("answer_as_an_argument", "host_copy"),
        ("decoy_kernel_torch_does_it", "no_triton_kernel"),
        ("autotune_pre_hook_does_the_work", "unwritten"),
    ],
)
def test_forgeries_fail_for_what_their_kernels_did(graded, forgery, code):
    row = next(r for r in graded["fast"] if r["submission"] == f"{forgery}.ipynb"
               and r["exercise"] == "transpose")  # fmt: skip
    assert row["verdict"] == "fail" and code in row["codes"].split(), row


def test_a_cell_that_takes_the_channel_over_answers_for_no_other(graded):
    found = verdicts(graded["fast"], "takeover.ipynb")
    assert found["transpose_v1"] in {"fail", "error"}, found
    assert {found[e] for e in ("transpose_v2", "transpose", "scaled_matmul")} == {"not_implemented"}


def test_an_input_recogniser_fails_on_ordinary_outputs(graded):
    row = verdicts(graded["fast"], "input_recogniser.ipynb")
    assert row["transpose"] == "fail"


def test_a_duplicated_exercise_cell_is_an_error_row(graded):
    assert verdicts(graded["fast"], "duplicated_ids.ipynb")["transpose"] == "error"


def test_every_inbox_entry_gets_its_rows(graded):
    everything = (graded["fast"], graded["slow"], graded["hostile"])
    for inbox, rows in zip(graded["inboxes"], everything, strict=True):
        keys = {entry_key(n) for n in os.listdir(inbox)}
        assert {r["key"] for r in rows} == keys
        for key in keys:
            found = [r for r in rows if r["key"] == key]
            assert len(found) in (1, 4), (key, found)
            assert len({r["exercise"] for r in found}) == len(found)
    for name in ("corrupt.ipynb", "notes.txt", "fifo.ipynb", "zero_link.ipynb", "deep.ipynb"):
        assert verdicts(graded["fast"], name) == {"*": "invalid"}, name


def verdict_and_detail(rows, submission, exercise_name):
    row = next(r for r in rows if r["submission"] == submission and r["exercise"] == exercise_name)
    return row["verdict"], row["detail"]


def test_resource_and_inbox_attacks_end_with_their_rows_and_caps_held(graded):
    rows = graded["hostile"]
    hang = verdict_and_detail(rows, "dead_pipe.ipynb", "transpose_v1")
    assert hang[0] in {"timeout", "review"} and "ran past the time limit" in hang[1], hang
    assert len(verdicts(rows, "dead_pipe.ipynb")) == 4  # the later exercises have their rows
    flood, balloon = (verdict_and_detail(rows, "flood_then_balloon.ipynb", e)
                      for e in ("transpose_v1", "transpose_v2"))  # fmt: skip
    assert flood[0] == "error" and "printed more than" in flood[1], flood
    # four children of 1.5 GiB under --memory-gib 2: the restarted worker's cgroup kills some
    assert "ends=[0, 0, 0, 0]" not in balloon[1], balloon
    assert balloon[0] != "pass", balloon
    surrogates = verdict_and_detail(rows, "surrogates.ipynb", "transpose_v1")
    assert "\\udcff" in surrogates[1], surrogates
    nested = {"review", "error", "fail", "missing", "not_implemented"}
    assert set(verdicts(rows, "deep_nesting.ipynb").values()) <= nested
    big = verdicts(rows, "big_cell.ipynb")
    assert big["transpose_v1"] == big["transpose_v2"] == "pass", big
    crash = verdicts(rows, "crash_then_honest.ipynb")
    assert crash["transpose_v1"] in {"fail", "error", "review"}, crash
    assert crash["transpose_v2"] == "pass", crash
    assert graded["elapsed"] < graded["bound"]  # the hostile inbox beside the slow one


def test_names_that_are_not_utf8_or_differ_in_a_newline_get_rows_of_their_own(graded):
    rows = {r["key"]: r for r in graded["hostile"]}
    assert rows["caf%E9.txt"]["submission"] == "caf\\xe9.txt"
    assert rows["alice%0Anotebook.txt"]["verdict"] == rows["alice%20notebook.txt"]["verdict"]
    assert [entry_name(k) for k in ("alice%0Anotebook.txt", "caf%E9.txt")] == [
        "alice\nnotebook.txt", os.fsdecode(b"caf\xe9.txt")]  # fmt: skip


def test_resume_matches_entries_by_their_key(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "alice notebook.txt").write_text("x")
    out = tmp_path / "grades.csv"
    argv = [str(inbox), "--reference", str(HOMEWORK), "--out", str(out), "--no-progress"]
    assert grade.main(argv) == 0
    (inbox / "alice\nnotebook.txt").write_text("x")
    (inbox / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    assert grade.main([*argv, "--resume"]) == 0
    with out.open(newline="") as f:
        keys = [r["key"] for r in csv.DictReader(f)]
    assert sorted(keys) == ["alice%0Anotebook.txt", "alice%20notebook.txt", "caf%E9.txt"]


def test_a_restarted_worker_gets_a_cgroup_of_its_own_with_every_cap(tmp_path):
    site = grade.package_copy(tmp_path / "site")
    limits = sandbox.Limits(seconds=30)
    first = sandbox.start(site, limits, "same-name", isolated=True)
    second = sandbox.start(site, limits, "same-name", isolated=True)
    try:
        groups = [first.cgroup, second.cgroup]
        if not groups[0].folders:
            pytest.skip("no writable cgroup here: per-process limits apply (README)")
        assert not set(groups[0].folders) & set(groups[1].folders)
        for group in groups:
            assert {"memory", "pids", "cpu"} <= set(group.limited), group.limited
        with pytest.raises(sandbox.CgroupError):  # a name in use is never shared
            sandbox.Cgroup(groups[0].folders[0].name.removeprefix("tmm-grade-"), limits)
    finally:
        first.end()
        second.end()
    assert not any(f.exists() for g in groups for f in g.folders)


def test_file_names_cannot_become_formulas(graded):
    raw = graded["csv"][graded["inboxes"][0]].decode()
    assert "\n=HYPERLINK" not in raw and "'=HYPERLINK" in raw


def test_endless_and_hungry_submissions_end_within_their_limits(graded):
    rows = graded["slow"]
    for name in SLOW:
        found = verdicts(rows, f"{name}.ipynb")
        # none defines transpose_v1: one whose cell ends (a daemon forked off, say) is missing
        assert found["transpose_v1"] in {"timeout", "error", "review", "missing"}, (name, found)
        assert found["transpose_v1"] != "pass"
    assert set(verdicts(rows, "untouched_after.ipynb").values()) == {"not_implemented"}
    # 8 slow entries two at a time, each within its limit plus a restart, beside the fast run
    # (and beside the other graders of this file, which share the machine's two cores)
    assert graded["elapsed"] < graded["bound"]


def test_the_inboxes_and_grades_are_unchanged_afterwards(graded):
    for inbox in graded["inboxes"]:
        assert grade.digest(inbox) == graded["before"][inbox]
        assert (inbox.parent / f"{inbox.name}.csv").read_bytes() == graded["csv"][inbox]


def test_nothing_a_submission_started_outlives_the_run(graded):
    # every process a run starts lives in a cgroup named after the run (it cannot leave it):
    # look at those runs' alone, so that another grader on this host changes nothing
    for _ in range(30):  # killed processes may take a moment to be gone
        if not _processes_of(graded["runs"]):
            break
        time.sleep(0.5)
    assert _processes_of(graded["runs"]) == []
    left = [p for run in graded["runs"] for p in Path(sandbox.CGROUP).rglob(f"*{run}-*")]
    assert left == []


def _processes_of(runs: list[str]) -> list[str]:
    found = []
    for cgroup in Path("/proc").glob("[0-9]*/cgroup"):
        try:
            text = cgroup.read_text()
        except OSError:
            continue
        if any(f"{run}-" in text for run in runs):
            found.append(cgroup.parent.name)
    return found


def _sandbox_processes() -> list[str]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = int(
                next(ln for ln in status.read_text().splitlines() if ln.startswith("Uid:")).split()[
                    1
                ]
            )
        except (OSError, StopIteration, ValueError):
            continue
        if sandbox.UID_RANGE[0] <= uid < sandbox.UID_RANGE[1]:
            found.append(status.parent.name)
    return found


# probes straight in a worker: the worker sends back what each found in its error text


@contextmanager
def worker(tmp_path: Path, limits: sandbox.Limits):
    site = grade.package_copy(tmp_path / f"site-{secrets.token_hex(3)}")
    running = sandbox.start(site, limits, f"probe-{secrets.token_hex(4)}", isolated=True)
    clients.Output(limits.output_bytes).drain(running)

    def run(source: str, seconds: float = 60) -> str:
        head, marker, tail = source.partition(REPORT)
        source = textwrap.dedent(head) + marker + tail
        wire.send(running.to_worker, {"op": "run", "source": source})
        reply, _ = wire.receive(running.from_worker, time.monotonic() + seconds, [])
        return reply.get("error", "") if not reply.get("ok") else ""

    try:
        yield run, running
    finally:
        running.end()


REPORT = "\nraise RuntimeError('R:' + repr("


def report(expression: str) -> str:
    return f"{REPORT}{expression}))\n"


PROBE_SETUP = """
import os, socket, signal, ctypes
def tried(fn):
    try:
        fn()
        return True
    except Exception:
        return False
"""


@pytest.fixture(scope="module")
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def test_a_worker_sees_nothing_of_the_host(tmp_path, listener):
    grades = tmp_path / "grades.csv"
    grades.write_text("secret")
    # the checkout itself may exist as a folder holding the bound .venv alone: probe its files
    targets = [str(HOMEWORK), str(HOMEWORK.parent), str(grades), str(ROOT / ".git"),
               str(ROOT / "README.md"), str(ROOT / "tmm_course"),
               "/root/.bashrc", "/etc/shadow", "/etc/passwd", "/proc/1/environ",
               f"/proc/{os.getpid()}/environ", str(tmp_path)]  # fmt: skip
    with worker(tmp_path, sandbox.Limits(seconds=60)) as (run, _):
        run(PROBE_SETUP)
        found = run(
            f"""
            seen = []
            for path in {targets!r}:
                if tried(lambda: open(path, 'rb').read(1)) or tried(lambda: os.listdir(path)):
                    seen.append(path)
            written = [p for p in ['/opt/tmm-site/tmm_course/check/engine.py', '/usr/x',
                       {str(Path(sys.prefix) / "x")!r}] if tried(lambda: open(p, 'a').write('#'))]
            net = [a for a in [('1.1.1.1', 53), ('127.0.0.1', {listener})]
                   if tried(lambda: socket.create_connection(a, timeout=1))]
            pids = [p for p in os.listdir('/proc') if p.isdigit()]
            stopped = [p for p in [1, {os.getpid()}, {os.getppid()}]
                       if p != os.getpid() and tried(lambda: os.kill(p, signal.SIGSTOP))]
            env = sorted(os.environ)
            top = sorted(os.listdir("/"))
            """
            + report("(seen, written, net, len(pids), stopped, os.getuid(), env, top)")
        )
    seen, written, net, pids, stopped, uid, env, top = eval(found.removeprefix("R:"))
    assert seen == [] and written == [] and net == [] and stopped == []
    allowed = {"usr", "bin", "lib", "lib64", "sbin", "proc", "dev", "tmp", "var", "run", "home"}
    allowed |= {p.parts[1] for p in [*sandbox.binds(), Path(sandbox.SITE)]}
    assert set(top) <= allowed, top
    assert pids < 10 and uid >= sandbox.UID_RANGE[0]
    assert not any("KEY" in name or "GRADE" in name for name in env), env


def test_nothing_survives_a_worker_or_reaches_the_next(tmp_path):
    token = secrets.token_hex(6)
    places = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/home/student"]
    limits = sandbox.Limits(seconds=60)
    with worker(tmp_path, limits) as (run, _):
        run(PROBE_SETUP)
        left = run(
            f"""
            for place in {places!r}:
                open(os.path.join(place, {token!r}), 'w').write('x')
            libc = ctypes.CDLL(None)
            segment = libc.shmget(0x7e57, 4096, 0o1666)
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    import time
                    while True:
                        if os.fork():
                            os._exit(0)
                        time.sleep(0.005)
                os._exit(0)
            """
            + report("(segment, os.getuid())")
        )
        segment, uid = eval(left.removeprefix("R:"))
        assert segment >= 0
    time.sleep(0.5)
    assert not any(_uid_of(p) == uid for p in _sandbox_processes())
    for place in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not (Path(place) / token).exists()
    keys = [line.split()[0] for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    assert str(0x7E57) not in keys
    with worker(tmp_path, limits) as (run, _):
        run(PROBE_SETUP)
        left = f"[p for p in {places!r} if os.path.exists(os.path.join(p, {token!r}))]"
        found = run(
            "libc = ctypes.CDLL(None)\n"
            + report(f"({left}, libc.shmget(0x7e57, 0, 0), os.getuid())")
        )
    stale, segment, other_uid = eval(found.removeprefix("R:"))
    assert stale == [] and segment == -1 and other_uid != uid


def _uid_of(pid: str) -> int | None:
    try:
        line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if ln.startswith("Uid:"))  # fmt: skip
        return int(line.split()[1])
    except (OSError, StopIteration):
        return None


def test_memory_processes_and_disk_are_capped_for_the_whole_submission(tmp_path):
    limits = sandbox.Limits(seconds=60, memory_bytes=1536 * 2**20, processes=64,
                            disk_bytes=32 * 2**20)  # fmt: skip
    with worker(tmp_path, limits) as (run, _):
        run(PROBE_SETUP)
        found = run(
            """
            def fill(path):
                written = 0
                try:
                    with open(path, 'wb') as f:
                        while written < 2**30:
                            f.write(b'x' * 2**20)
                            written += 2**20
                except OSError:
                    pass
                return written
            disk = fill(os.path.expanduser('~/fill')), fill('/tmp/fill'), fill('/dev/shm/fill')
            children = []
            try:
                for _ in range(200):
                    pid = os.fork()
                    if pid == 0:
                        import time
                        time.sleep(30)
                        os._exit(0)
                    children.append(pid)
            except OSError:
                pass
            for pid in children:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            hogs = []
            for _ in range(3):
                pid = os.fork()
                if pid == 0:
                    block = bytearray(700 * 2**20)
                    block[::4096] = b'x' * len(block[::4096])
                    import time
                    time.sleep(5)
                    os._exit(0)
                hogs.append(pid)
            ends = [os.waitpid(pid, 0)[1] for pid in hogs]
            """
            + report("(disk, len(children), ends)"),
            seconds=120,
        )
    disk, processes, ends = eval(found.removeprefix("R:"))
    assert disk[0] <= 33 * 2**20 and disk[1] <= 65 * 2**20 and disk[2] <= 65 * 2**20
    assert processes < 64
    assert any(end != 0 for end in ends), "three children of 700 MiB under a 1.5 GiB cap"
