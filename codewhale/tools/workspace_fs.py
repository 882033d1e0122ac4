"""The one workspace file opener: every path is reached from a handle on the workspace root,
one directory at a time, and never through a symlink.

`permissions.confine` checks a path by resolving it, but that check is by name: a
directory swapped for a symlink after it (a sandboxed command can do that) would carry
anything opened by name outside the workspace, since O_NOFOLLOW guards only the last
component. Here the directories of a path are opened from a descriptor of the root with
`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it, else one
`O_NOFOLLOW | O_DIRECTORY` component at a time, and the file itself is then reached by
name inside the directory it lives in (`dir_fd`, `O_NOFOLLOW`). Whatever is renamed
meanwhile, what is opened lies below the root, or the call fails.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from codewhale.permissions import spelled_below
from codewhale.tools.base import ToolError

# openat2(2) has one number on every Linux architecture: it came after the tables were unified.
_SYS_OPENAT2 = 437
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
# O_PATH: a handle for *at() calls that needs no read permission on the directory itself.
_DIRECTORY_HANDLE = (
    os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
)


class NoSuchPath(ToolError):
    """The file, or a directory on its way, does not exist."""


class _OpenHow(ctypes.Structure):
    """`struct open_how` of <linux/openat2.h>."""

    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


@functools.cache
def _syscall() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall


def _openat2(directory: int, relative: str, flags: int) -> int:
    """`relative` opened below `directory` with no symlink and no escape; OSError as open(2)."""
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)
    result = _syscall()(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(directory),
        ctypes.c_char_p(os.fsencode(relative)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), relative)
    return int(result)


@functools.cache
def kernel_has_openat2() -> bool:
    """Whether openat2 works here: Linux 5.6 or later, and not filtered out by a seccomp policy."""
    if sys.platform != "linux":
        return False
    root = os.open("/", _DIRECTORY_HANDLE)
    try:
        os.close(_openat2(root, ".", _DIRECTORY_HANDLE))
    except OSError:  # ENOSYS on older kernels; EPERM from some container policies
        return False
    finally:
        os.close(root)
    return True


def _below(root: Path, path: Path, label: str) -> tuple[Path, list[str]]:
    """The root as `path` spells it, and `path`'s components below it (none for the root)."""
    # The usual case is told from the spellings alone: comparing the paths' parts with
    # pathlib costs more than opening the file does.
    below = spelled_below(str(path), str(root))
    if below is not None:
        names = below.split("/") if below else []
    else:
        if not path.is_relative_to(root):
            # confine() hands over resolved paths; the root is resolved too only when it
            # must be, since walks open a file in every directory they pass.
            root = root.resolve()
        try:
            names = list(path.relative_to(root).parts)
        except ValueError:
            raise ToolError(f"{label} is outside the workspace {root}") from None
    # Resolved paths have none; a '..' here would climb out of the root handle.
    if ".." in names:
        raise ToolError(f"{label}: '..' is not allowed in a path the file tools open")
    return root, names


def _open_root(root: Path) -> int:
    try:
        return os.open(root, _DIRECTORY_HANDLE)
    except OSError as error:
        raise ToolError(f"the workspace {root} cannot be opened: {error.strerror}") from None


@contextmanager
def parent_directory(
    root: Path, path: Path, label: str, *, create: bool = False, openat2: bool = True
) -> Iterator[tuple[int, str]]:
    """A descriptor of the directory holding `path`, and `path`'s name in it.

    `path` must lie below the workspace `root` (confine() has checked it). With `create`,
    missing directories are made one at a time, each inside the handle of the one before.
    `openat2=False` takes the portable walk even where the kernel has openat2.
    """
    root, names = _below(root, path, label)
    *directories, name = names or ["."]
    descriptor = _open_directories(root, directories, label, create, openat2)
    try:
        yield descriptor, name
    finally:
        os.close(descriptor)


def _open_directories(root: Path, names: list[str], label: str, create: bool, openat2: bool) -> int:
    current = _open_root(root)
    if not names:
        return current
    if openat2 and kernel_has_openat2():
        try:
            found = _openat2(current, "/".join(names), _DIRECTORY_HANDLE)
        except OSError:
            pass  # the walk below does it again, and names what is missing or a symlink
        else:
            os.close(current)
            return found
    return _walk(current, names, label, create)


def _walk(current: int, names: list[str], label: str, create: bool) -> int:
    """Descend through `names` from `current` (closed here), never following a symlink."""
    try:
        for depth, name in enumerate(names, start=1):
            shown = "/".join(names[:depth])
            if create:
                _make_directory(current, name, shown, label)
            try:
                following = os.open(name, _DIRECTORY_HANDLE, dir_fd=current)
            except OSError as error:
                raise _refusal(current, name, shown, label, error) from None
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def _make_directory(directory: int, name: str, shown: str, label: str) -> None:
    """Make `name` in `directory` unless something has that name already.

    mkdir never follows a symlink: one in the way is left as it is, and the O_NOFOLLOW
    open after this refuses it.
    """
    try:
        os.mkdir(name, 0o777, dir_fd=directory)
    except FileExistsError:
        pass
    except OSError as error:
        raise ToolError(f"{label}: {shown} cannot be created: {error.strerror}") from None


def _refusal(directory: int, name: str, shown: str, label: str, error: OSError) -> ToolError:
    """Why the walk could not enter `name`, worded for the model."""
    try:
        info: os.stat_result | None = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except OSError:
        info = None
    if info is not None and stat.S_ISLNK(info.st_mode):
        return ToolError(
            f"{label}: {shown} is a symbolic link; the file tools do not follow symlinks "
            "inside a path they open (it may have been swapped in after the path was checked)"
        )
    if info is None and error.errno == errno.ENOENT:
        where = "" if shown == label else f" ({shown} does not exist)"
        return NoSuchPath(f"{label}: no such file or directory{where}")
    if info is not None and not stat.S_ISDIR(info.st_mode):
        return ToolError(f"{label}: {shown} is not a directory")
    if info is not None and error.errno in (errno.ENOTDIR, errno.ELOOP):
        # A directory now, but not when it was opened: something is swapping it.
        return ToolError(f"{label}: {shown} changed while it was being opened; try again")
    return ToolError(f"{label}: {shown} cannot be opened: {error.strerror}")


def lstat_in(directory: int, name: str, label: str) -> os.stat_result:
    """`name`'s own status in `directory` (a symlink is not followed); NoSuchPath if absent."""
    try:
        return os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        raise NoSuchPath(f"{label}: no such file") from None
    except OSError as error:
        raise ToolError(f"{label}: {error.strerror}") from None


def open_in(directory: int, name: str, flags: int, label: str, verb: str) -> int:
    """`name` opened in `directory` with `flags`, never through a symlink."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=directory)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ToolError(
                f"{label} is a symbolic link; symlinks are not followed, so it cannot be {verb}"
            ) from None
        raise ToolError(f"{label} cannot be {verb}: {error.strerror}") from None


def lstat_beneath(root: Path, path: Path, label: str) -> os.stat_result | None:
    """`path`'s own status, reached without symlinks; None when it or a parent is missing."""
    try:
        with parent_directory(root, path, label) as (directory, name):
            return lstat_in(directory, name, label)
    except NoSuchPath:
        return None


def open_directory(root: Path, path: Path, label: str) -> int:
    """A readable descriptor of the directory `path` (for os.scandir), reached without symlinks."""
    with parent_directory(root, path, label) as (directory, name):
        try:
            return os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory
            )
        except OSError as error:
            if error.errno == errno.ENOTDIR:
                raise ToolError(f"{label}: not a directory") from None
            raise _refusal(directory, name, label, label, error) from None


def remove(root: Path, path: Path, label: str, *, missing_ok: bool = False) -> None:
    """Unlink the name `path` (never what a symlink there points to) inside its own directory."""
    try:
        with parent_directory(root, path, label) as (directory, name):
            os.unlink(name, dir_fd=directory)
    except (NoSuchPath, FileNotFoundError):
        if not missing_ok:
            raise NoSuchPath(f"{label}: no such file") from None
    except OSError as error:
        raise ToolError(f"{label} cannot be deleted: {error.strerror}") from None


def replace_file(root: Path, path: Path, data: bytes, label: str, *, mode: int = 0o600) -> None:
    """Replace `path` with `data` at once: readers see the old file or the new one.

    The data goes to a new name beside `path` (created with `mode`, never chmod-ed), is
    synced, then renamed over `path`, inside the directory reached without symlinks; a
    symlink at `path` itself is replaced, never followed.
    """
    with parent_directory(root, path, label, create=True) as (directory, name):
        temporary = f".{name}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            descriptor = os.open(temporary, flags, mode, dir_fd=directory)
        except OSError as error:
            raise ToolError(f"{label} cannot be written: {error.strerror}") from None
        try:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        except OSError as error:
            with suppress(OSError):
                os.unlink(temporary, dir_fd=directory)
            raise ToolError(f"{label} cannot be written: {error.strerror}") from None
