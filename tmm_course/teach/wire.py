"""The channel between the judge and a worker: frames over two pipes the judge opens.

A frame is a 4-byte big-endian length, a JSON header of that length, then the raw bytes of each
blob the header lists (``"blobs": [n, ...]``). The judge reads and writes with a deadline (its
ends of the pipes are non-blocking: a worker that stops reading, or puts another pipe over its
own end, cannot stall a write) and caps everything it reads: a worker's header is at most
:data:`HEADER_CAP` bytes and the blobs must have exactly the sizes the judge expects, so a worker
can neither stall it nor make it hold more than it asked for. Nothing read back is unpickled or
evaluated. The worker's side trusts the judge: a header the judge sends (an exercise cell of up
to the inbox's 8 MiB, say) may be up to :data:`TRUSTED_HEADER_CAP` bytes.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

HEADER_CAP = 64 * 1024
TRUSTED_HEADER_CAP = 256 * 2**20  # an 8 MiB cell as JSON: at most 12 bytes per character


class ChannelError(RuntimeError):
    """The other side broke the protocol, went away, or ran past the deadline."""


class Timeout(ChannelError):
    """No complete frame before the deadline."""


def send(fd: int, header: dict, blobs: list[bytes] = (), deadline: float | None = None) -> None:
    """One frame; with a ``deadline`` (monotonic seconds), :class:`Timeout` if the other side has
    not taken all of it by then (the descriptor is made non-blocking for that)."""
    header = {**header, "blobs": [len(b) for b in blobs]}
    data = json.dumps(header).encode()
    payload = struct.pack(">I", len(data)) + data
    if deadline is not None:
        os.set_blocking(fd, False)
    _write_all(fd, payload, deadline)
    for blob in blobs:
        _write_all(fd, blob, deadline)


def _write_all(fd: int, data: bytes, deadline: float | None) -> None:
    view = memoryview(data)
    while view:
        if deadline is not None:
            _wait(fd, select.POLLOUT, deadline, "the other side took no more before the deadline")
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        except BrokenPipeError:
            raise ChannelError("the other side closed the channel") from None
        view = view[written:]


def _wait(fd: int, events: int, deadline: float, why: str) -> None:
    """Until ``fd`` is ready for ``events`` (or hung up), or :class:`Timeout` at ``deadline``."""
    wait = deadline - time.monotonic()
    if wait <= 0:
        raise Timeout(why)
    poller = select.poll()  # not select(): any descriptor number works
    poller.register(fd, events | select.POLLHUP | select.POLLERR)
    if not poller.poll(max(1, int(wait * 1000))):
        raise Timeout(why)


def read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    """``size`` bytes from ``fd``, or :class:`Timeout` at ``deadline`` (monotonic seconds)."""
    chunks, left = [], size
    while left:
        if deadline is not None:
            _wait(fd, select.POLLIN, deadline, "no answer before the deadline")
        try:
            chunk = os.read(fd, min(left, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            raise ChannelError("the other side closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(
    fd: int, deadline: float | None = None, blob_sizes: list[int] | None = None
) -> tuple[dict, list[bytes]]:
    """One frame: its header and blobs. ``blob_sizes``: what the blobs must be (the judge's
    side); None accepts what the header says (the worker's side, which trusts the judge)."""
    (length,) = struct.unpack(">I", read_exactly(fd, 4, deadline))
    cap = HEADER_CAP if blob_sizes is not None else TRUSTED_HEADER_CAP
    if length > cap:
        raise ChannelError(f"a header of {length} bytes (at most {cap})")
    try:
        header = json.loads(read_exactly(fd, length, deadline))
    except (ValueError, UnicodeDecodeError) as error:
        raise ChannelError(f"a header that is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise ChannelError("a header that is not an object")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ChannelError("blob sizes that are not a list of sizes")
    if blob_sizes is not None and sizes and sizes != blob_sizes:
        raise ChannelError(f"blobs of {sizes} bytes, expected {blob_sizes}")
    return header, [read_exactly(fd, size, deadline) for size in sizes]
