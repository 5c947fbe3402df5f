"""A FUSE filesystem with a volatile write cache, for power-loss tests (run as a process of its own).

    python powercut_fs.py BACKING MOUNTPOINT

Every file's current content lives in this process's memory. What reaches BACKING, the
"disk", is only what a sync made durable:

* a file's data, when that file is fsync'ed or fdatasync'ed (through any descriptor);
* the directory's entries (creations, unlinks, renames), when the directory is fsync'ed.
  POSIX promises no more, and it is what SQLite itself syncs; a new file whose name was
  never synced is gone after a cut, however often its data was.

Killing this process is the power cut: every write not yet synced is lost, and the next
mount shows exactly what BACKING holds. BACKING keeps the durable directory in
`namespace.json` (replaced atomically) and each file's synced data in `inodes/<id>`; a
file named there whose data was never synced comes back empty, as on a real filesystem.

Commands on stdin, one per line, each answered "ok" (or "error …") on stdout:
  fail OP SUFFIX ERRNO  make OP (fsync, fsyncdir, write, create, open, rename, unlink) fail with ERRNO
                        (EIO, ENOSPC, EROFS) on files whose name ends with SUFFIX ("*": any file)
  clear                 remove every injected failure
  lying on|off          while on, fsync and fsyncdir succeed without writing anything (a disk that
                        ignores cache flushes): the test of the test, acknowledged data must then be lost
  spill SEED            write a random half of the unsynced pages to BACKING, and with even odds the
                        directory too (what a disk's cache may have written back before the power
                        went); the next cut then drops only the rest
  stats                 "ok fsyncs=N fsyncdirs=N writes=N"
The line "MOUNTED" on stdout says the filesystem is up.
"""

from __future__ import annotations

import errno
import json
import os
import random
import stat
import sys
import threading
import time
from typing import Any

from fuse import FUSE, FuseOSError, Operations

PAGE = 4096


class Node:
    """A file: its current bytes, and which pages of them differ from its synced copy."""

    __slots__ = ("id", "data", "dirty", "resized", "mtime")

    def __init__(self, node_id: int, data: bytes = b"") -> None:
        self.id = node_id
        self.data = bytearray(data)
        self.dirty: set[int] = set()
        self.resized = False
        self.mtime = time.time()


class PowerCutFS(Operations):
    use_ns = True
    lock = None  # POSIX and flock locks: the kernel keeps them locally
    bmap = None
    getxattr = listxattr = setxattr = removexattr = None  # ENOSYS once, instead of one call per write

    def __init__(self, backing: str) -> None:
        self.backing = backing
        self.inodes = os.path.join(backing, "inodes")
        os.makedirs(self.inodes, exist_ok=True)
        self.mutex = threading.Lock()
        self.faults: dict[tuple[str, str], int] = {}
        self.lying = False
        self.counts = {"fsyncs": 0, "fsyncdirs": 0, "writes": 0}
        self.handles: dict[int, Node] = {}
        self.next_handle = 1
        durable = self._read_namespace()
        self.next_id = durable["next_id"]
        self.names: dict[str, Node] = {}
        for name, node_id in durable["names"].items():
            try:
                with open(os.path.join(self.inodes, str(node_id)), "rb") as f:
                    data = f.read()
            except FileNotFoundError:  # named, but its data was never synced
                data = b""
            self.names[name] = Node(node_id, data)

    # -- the durable side -------------------------------------------------------

    def _read_namespace(self) -> dict[str, Any]:
        try:
            with open(os.path.join(self.backing, "namespace.json")) as f:
                return json.load(f)
        except FileNotFoundError:
            return {"next_id": 1, "names": {}}

    def _write_namespace(self) -> None:
        path = os.path.join(self.backing, "namespace.json")
        temporary = path + ".tmp"
        with open(temporary, "w") as f:
            json.dump({"next_id": self.next_id, "names": {n: node.id for n, node in self.names.items()}}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
        directory = os.open(self.backing, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        referenced = {str(node.id) for node in self.names.values()} | {str(n.id) for n in self.handles.values()}
        for leftover in os.listdir(self.inodes):  # files unlinked for good
            if leftover not in referenced:
                os.remove(os.path.join(self.inodes, leftover))

    def _sync_node(self, node: Node) -> None:
        fd = os.open(os.path.join(self.inodes, str(node.id)), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = len(node.data)
            for page in sorted(node.dirty):
                start = page * PAGE
                if start < size:
                    os.pwrite(fd, bytes(node.data[start:start + PAGE]), start)
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)
        node.dirty.clear()
        node.resized = False

    def _spill(self, rng: random.Random) -> None:
        for node in {id(n): n for n in [*self.names.values(), *self.handles.values()]}.values():
            pages = [page for page in sorted(node.dirty) if rng.random() < 0.5]
            if not pages:
                continue
            fd = os.open(os.path.join(self.inodes, str(node.id)), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                for page in pages:
                    os.pwrite(fd, bytes(node.data[page * PAGE:(page + 1) * PAGE]), page * PAGE)
            finally:
                os.close(fd)
        if rng.random() < 0.5:
            self._write_namespace()

    # -- helpers ------------------------------------------------------------------

    def _check(self, op: str, name: str) -> None:
        for (fault_op, suffix), code in self.faults.items():
            if fault_op == op and (suffix == "*" or name.endswith(suffix)):
                raise FuseOSError(code)

    def _node(self, path: str | None, fh: int | None = None) -> Node:
        if fh:
            node = self.handles.get(fh)
            if node is not None:
                return node
        node = self.names.get(_name(path))
        if node is None:
            raise FuseOSError(errno.ENOENT)
        return node

    def _handle(self, node: Node) -> int:
        handle = self.next_handle
        self.next_handle += 1
        self.handles[handle] = node
        return handle

    def _name_of(self, node: Node) -> str:
        return next((name for name, n in self.names.items() if n is node), "")

    # -- the operations -------------------------------------------------------------

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        with self.mutex:
            if path == "/":
                now = time.time_ns()
                return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, "st_size": 0,
                        "st_atime": now, "st_mtime": now, "st_ctime": now}
            node = self._node(path, fh)
            mtime = int(node.mtime * 1e9)
            linked = 1 if any(n is node for n in self.names.values()) else 0
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": linked, "st_size": len(node.data),
                    "st_atime": mtime, "st_mtime": mtime, "st_ctime": mtime}

    def readdir(self, path: str, fh: int) -> list[str]:
        with self.mutex:
            return [".", ".."] + list(self.names)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self.mutex:
            name = _name(path)
            self._check("create", name)
            node = Node(self.next_id)
            self.next_id += 1
            self.names[name] = node
            return self._handle(node)

    def open(self, path: str, flags: int) -> int:
        with self.mutex:
            node = self._node(path)
            self._check("open", _name(path))
            if flags & os.O_TRUNC:
                self._resize(node, 0)
            return self._handle(node)

    def release(self, path: str | None, fh: int) -> int:
        with self.mutex:
            self.handles.pop(fh, None)
            return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self.mutex:
            return bytes(self._node(path, fh).data[offset:offset + size])

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self.mutex:
            node = self._node(path, fh)
            self._check("write", _name(path) if path else self._name_of(node))
            end = offset + len(data)
            if end > len(node.data):
                node.data.extend(bytes(end - len(node.data)))
                node.resized = True
            node.data[offset:end] = data
            node.dirty.update(range(offset // PAGE, (end - 1) // PAGE + 1))
            node.mtime = time.time()
            self.counts["writes"] += 1
            return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self.mutex:
            self._resize(self._node(path, fh), length)
            return 0

    def _resize(self, node: Node, length: int) -> None:
        old = len(node.data)
        if length < old:
            del node.data[length:]
            node.dirty = {p for p in node.dirty if p * PAGE < length}
            if length % PAGE:
                node.dirty.add(length // PAGE)
        elif length > old:
            node.data.extend(bytes(length - old))
            node.dirty.update(range(old // PAGE, (length - 1) // PAGE + 1))
        node.resized = True
        node.mtime = time.time()

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self.mutex:
            node = self._node(path, fh)
            self._check("fsync", _name(path) if path else self._name_of(node))
            self.counts["fsyncs"] += 1
            if not self.lying:
                self._sync_node(node)
            return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self.mutex:
            self._check("fsyncdir", "/")
            self.counts["fsyncdirs"] += 1
            if not self.lying:
                self._write_namespace()
            return 0

    def unlink(self, path: str) -> int:
        with self.mutex:
            name = _name(path)
            self._check("unlink", name)
            if self.names.pop(name, None) is None:
                raise FuseOSError(errno.ENOENT)
            return 0

    def rename(self, old: str, new: str) -> int:
        with self.mutex:
            self._check("rename", _name(new))
            node = self.names.pop(_name(old), None)
            if node is None:
                raise FuseOSError(errno.ENOENT)
            self.names[_name(new)] = node
            return 0

    def chmod(self, path: str, mode: int) -> int:
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        raise FuseOSError(errno.EPERM)  # one flat folder is all the tests need

    def statfs(self, path: str) -> dict[str, int]:
        s = os.statvfs(self.backing)
        return {key: getattr(s, key) for key in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                                 "f_files", "f_ffree", "f_favail", "f_namemax")}

    def init(self, path: str) -> None:
        print("MOUNTED", flush=True)

    # -- the control channel -----------------------------------------------------------

    def command(self, line: str) -> str:
        words = line.split()
        with self.mutex:
            if words[:1] == ["fail"] and len(words) == 4 and hasattr(errno, words[3]):
                self.faults[(words[1], words[2])] = getattr(errno, words[3])
            elif words == ["clear"]:
                self.faults.clear()
            elif words[:1] == ["lying"] and words[1:] in (["on"], ["off"]):
                self.lying = words[1] == "on"
            elif words[:1] == ["spill"] and len(words) == 2 and words[1].isdigit():
                self._spill(random.Random(int(words[1])))
            elif words == ["stats"]:
                return "ok " + " ".join(f"{k}={v}" for k, v in self.counts.items())
            else:
                return f"error: cannot understand {line!r}"
        return "ok"


def _name(path: str | None) -> str:
    if not path or path.count("/") != 1:
        raise FuseOSError(errno.ENOENT)
    return path[1:]


def main() -> None:
    backing, mountpoint = sys.argv[1], sys.argv[2]
    fs = PowerCutFS(backing)

    def control() -> None:
        for line in sys.stdin:
            if line.strip():
                print(fs.command(line.strip()), flush=True)

    threading.Thread(target=control, daemon=True).start()
    # Without hard_remove, libfuse renames a file unlinked while open to .fuse_hidden…, which keeps
    # it reachable by name (fstat of an open file reaches a FUSE filesystem by name only).
    FUSE(fs, mountpoint, foreground=True, nothreads=True, fsname="powercut")


if __name__ == "__main__":
    main()
