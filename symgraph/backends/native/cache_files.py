"""Files of the compile cache: hashing, private writes, listing entries."""

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CacheEntry", "sha256_file", "write_private", "write_private_atomic",
           "scandirs", "entry_info", "META_NAME", "FUNCTIONS", "function_entries"]

META_NAME = "meta.json"
#: The folder of warm-start entries (``compile/warm_start.py``): one file each.
FUNCTIONS = "functions"


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class CacheEntry:
    """One entry as listed: its key, folder, total size in bytes, creation and last
    use (seconds since the epoch), whether it is complete, and its meta (key parts
    summary) when asked for."""

    key: str
    path: Path
    size: int
    created: float
    last_used: float
    complete: bool
    meta: dict = field(default_factory=dict)


def write_private(path, text):
    """Write ``text`` to a new file ``path`` readable and writable by its owner
    only, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_private_atomic(path, text):
    """Replace ``path`` with a private (0600) file holding ``text`` (a str, or
    bytes): written to a temporary name in the same folder, then renamed
    (readers see either file)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    binary = isinstance(text, (bytes, bytearray))
    try:
        with os.fdopen(fd, "wb" if binary else "w",
                       encoding=None if binary else "utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def scandirs(path):
    """The sub-folders of ``path`` (no symlinks); none if ``path`` is missing."""
    try:
        items = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [item for item in items if item.is_dir(follow_symlinks=False)]


def entry_info(folder, details):
    try:
        files = list(os.scandir(folder))
        created = os.stat(folder).st_mtime  # set when meta.json was written in it
    except OSError:
        return None  # removed meanwhile
    size, last_used, complete = 0, created, False
    for item in files:
        with contextlib.suppress(OSError):
            st = item.stat(follow_symlinks=False)
            size += st.st_size
            if item.name == META_NAME:
                last_used, complete = st.st_mtime, True
    meta = {}
    if details and complete:
        try:
            meta = json.loads((folder / META_NAME).read_bytes())
        except (OSError, ValueError):
            complete = False
    return CacheEntry(folder.name, folder, size, created, last_used, complete, meta)


def function_entries(root):
    """The warm-start entries under ``root`` as :class:`CacheEntry` (complete:
    a file is written whole, then renamed into place); none if there are none."""
    entries = []
    try:
        items = list(os.scandir(os.path.join(root, FUNCTIONS)))
    except (FileNotFoundError, NotADirectoryError):
        return entries
    for item in items:
        if not item.name.endswith(".pkl") or not item.is_file(follow_symlinks=False):
            continue            # a temporary file of a write in progress, or a stranger
        with contextlib.suppress(OSError):
            st = item.stat(follow_symlinks=False)
            entries.append(CacheEntry(item.name[:-4], Path(item.path), st.st_size,
                                      st.st_mtime, st.st_mtime, True))
    return entries
