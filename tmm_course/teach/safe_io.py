"""Reading what others made without trusting it, and writing a CSV a spreadsheet cannot run.

Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` (a symlink or a FIFO never blocks or
redirects the grader), must be regular files (``fstat``), and are read up to a cap.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import quote, unquote_to_bytes

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "|", "%")


class Unreadable(OSError):
    """Not a regular file, too large, or not there."""


def read_capped(folder: Path, name: str, cap: int) -> bytes:
    """The bytes of ``folder/name``, a regular file of at most ``cap`` bytes, not a link."""
    if "/" in name or name in ("", ".", ".."):
        raise Unreadable(f"not a plain file name: {name!r}")
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory
            )
        except OSError as error:
            raise Unreadable(f"cannot open it as a file ({error.strerror})") from None
    finally:
        os.close(directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("not a regular file")
        if info.st_size > cap:
            raise Unreadable(f"{info.st_size} bytes, more than the {cap} a notebook may have")
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            raise Unreadable(f"more than {cap} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def kind(folder: Path, name: str) -> str:
    """What ``folder/name`` is, without following it: file, folder, link, fifo, other."""
    try:
        mode = os.lstat(folder / name).st_mode
    except OSError:
        return "gone"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISFIFO(mode):
        return "fifo"
    return "other"


def csv_cell(value: object) -> str:
    """``value`` as a CSV cell no spreadsheet evaluates and any UTF-8 writer takes: a leading
    formula character gets a quote in front, control characters become spaces, and what UTF-8
    cannot hold (a lone surrogate) is written as its escape (``\\udcff``)."""
    text = "".join(" " if (ord(ch) < 32 and ch not in "\t") else ch for ch in str(value))
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if text.startswith(FORMULA_PREFIXES):
        text = "'" + text
    return text


def clipped(text: str, limit: int) -> str:
    """``text`` whole if it has at most ``limit`` characters, else cut at the last word break
    before the limit and marked with an ellipsis: a CSV cell stays bounded and never ends
    mid-word."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    cut = head.rstrip().rsplit(None, 1)[0] if " " in head.strip() else head
    return cut.rstrip(" ,;:") + "…"


def shown_name(name: str) -> str:
    """An inbox entry's name as a person reads it: bytes that are not UTF-8 as ``\\xff``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def entry_key(name: str) -> str:
    """An inbox entry's name as a key no two names share: its raw bytes, percent-encoded
    (``alice%0Anotebook.ipynb`` is not ``alice%20notebook.ipynb``); never a formula."""
    return quote(os.fsencode(name), safe="").replace("-", "%2D")


def entry_name(key: str) -> str:
    """The inbox entry's name back from :func:`entry_key`."""
    return os.fsdecode(unquote_to_bytes(key))


def remove_tree(root: Path) -> None:
    """Remove ``root`` and everything below it without recursion, without following links and
    without long paths (each step relative to one open folder): a tree thousands of folders
    deep, or links out of it, cost nothing but time."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root, flags)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        os.unlink(root)
        return
    names: list[str] = []  # the way down from root
    while True:
        below = None
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    below = below or entry.name
                else:
                    os.unlink(entry.name, dir_fd=fd)
        if below is not None:
            child = os.open(below, flags, dir_fd=fd)
            os.close(fd)
            fd, names = child, [*names, below]
            continue
        if not names:
            os.close(fd)
            os.rmdir(root)
            return
        parent = os.open("..", flags, dir_fd=fd)
        os.close(fd)
        os.rmdir(names.pop(), dir_fd=parent)
        fd = parent
