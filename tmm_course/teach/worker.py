"""The student's side of grading, run inside the sandbox: it holds no key and no verdict.

    python -m tmm_course.teach.worker READ_FD WRITE_FD

It runs what the judge sends, in one namespace, as a notebook would: the reference's setup cell,
then each exercise cell; then it calls the exercise's launcher on the tensors the judge sent and
sends back the storages of every tensor it was given. It decides nothing: the judge compares.
"""

from __future__ import annotations

import linecache
import sys
import traceback


def _display(*values: object, **_: object) -> None:
    """``display()`` as a notebook has it, printing plainly."""
    for value in values:
        print(repr(value))


def _tensors(header: dict, blobs: list[bytes]):
    import torch

    import tmm_course

    args = []
    storages = []
    for spec in header["args"]:
        if spec["kind"] == "scalar":
            args.append(spec["value"])
            continue
        dtype = getattr(torch, spec["dtype"])
        storage = torch.frombuffer(bytearray(blobs[spec["blob"]]), dtype=dtype).to(
            tmm_course.DEVICE
        )
        storages.append(storage)
        args.append(torch.as_strided(storage, spec["size"], spec["stride"], spec["offset"]))
    return args, storages


def _error(error: BaseException) -> dict:
    return {
        "ok": False,
        "error_type": type(error).__name__,
        "error": str(error)[:400],
        "where": "".join(traceback.format_exception_only(type(error), error))[-400:],
    }


def serve(read_fd: int, write_fd: int) -> None:
    from tmm_course.teach import wire

    namespace: dict = {"__name__": "__main__", "display": _display}
    count = 0
    while True:
        try:
            header, blobs = wire.receive(read_fd)
        except wire.ChannelError:
            return
        op = header.get("op")
        if op == "bye":
            return
        reply: dict = {"ok": True}
        out: list[bytes] = []
        try:
            if op == "run":
                count += 1
                filename = f"<cell {count}: {header.get('name', '')}>"
                source = header["source"]
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                exec(compile(source, filename, "exec"), namespace)  # the judge's order, in order
            elif op == "call":
                fn = namespace.get(header["name"])
                if not callable(fn):
                    reply = {
                        "ok": False,
                        "error_type": "missing",
                        "error": f"no function named {header['name']}",
                    }
                else:
                    args, storages = _tensors(header, blobs)
                    fn(*[args[i] for i in header["order"]])
                    _synchronize()
                    out = [s.cpu().numpy().tobytes() for s in storages]
        except BaseException as error:  # the student's code: any failure is an answer
            if isinstance(error, SystemExit | KeyboardInterrupt) and op != "call":
                reply = _error(RuntimeError(f"{type(error).__name__} raised"))
            else:
                reply = _error(error)
            out = []
        sys.stdout.flush()
        wire.send(write_fd, reply, out)


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
