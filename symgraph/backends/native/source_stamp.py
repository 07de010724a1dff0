"""A cheap fingerprint of symgraph's own source files, for facts derived from them.

Some values cost real time to derive from the sources in every new process
(the support library's source hash: importing four codegen modules and
generating its C text; the warm-start key's version part).  The sources change
only when someone edits a checkout or reinstalls, so these values are recorded
in the compile cache under :func:`source_stamp`, a digest of each file's name,
size and modification time, which a ``stat`` of the tree gives in 1-2 ms.

A stamp taken while a file is being edited could miss the edit that follows
in the same clock tick (the "racy" case of git's index): a file whose mtime is
within :data:`RACY_SECONDS` of the stamp is too fresh to vouch for its
content, and :func:`source_stamp` says so (``settled`` false); then nothing
derived from it may be recorded.
"""

import hashlib
import os
import time

__all__ = ["Stamp", "source_stamp", "stamp_folders", "RACY_SECONDS"]

#: A file modified this recently may still change within its mtime's tick.
RACY_SECONDS = 2.0

_STAMP = None


def stamp_folders(folders):
    """``(digest, newest_mtime_ns)`` of the files under ``folders``, a sequence
    of ``(path, suffixes)`` (suffixes: the file name endings taken, None for
    every file); ``__pycache__`` folders are skipped."""
    lines, newest = [], [0]
    for root, suffixes in folders:
        _stamp_folder(str(root), "", suffixes, lines, newest)
    digest = hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()
    return digest, newest[0]


def _stamp_folder(folder, prefix, suffixes, lines, newest):
    """Append ``name size mtime`` of each file under ``folder`` to ``lines``,
    in name order, and keep the newest mtime in ``newest[0]``."""
    try:
        items = sorted(os.scandir(folder), key=lambda item: item.name)
    except OSError:
        return
    for item in items:
        name = prefix + item.name
        if item.is_dir(follow_symlinks=False):
            if item.name != "__pycache__":
                _stamp_folder(item.path, name + "/", suffixes, lines, newest)
        elif suffixes is None or item.name.endswith(suffixes):
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            lines.append(f"{name}\0{st.st_size}\0{st.st_mtime_ns}")
            if st.st_mtime_ns > newest[0]:
                newest[0] = st.st_mtime_ns


class Stamp:
    """A stamp: ``digest`` (hex), ``newest_mtime_ns`` and when it was taken
    (``taken_ns``, wall clock)."""

    __slots__ = ("digest", "newest_mtime_ns", "taken_ns")

    def __init__(self, digest, newest_mtime_ns, taken_ns):
        self.digest, self.newest_mtime_ns, self.taken_ns = digest, newest_mtime_ns, taken_ns

    @property
    def settled(self):
        """True when every file was older than :data:`RACY_SECONDS` when the
        stamp was taken, so that any later edit gives another stamp."""
        return self.taken_ns - self.newest_mtime_ns >= RACY_SECONDS * 1e9


def source_stamp():
    """The :class:`Stamp` of symgraph's package (its ``.py`` and ``.so`` files)
    and of ``c_src/`` (every file), taken once per process."""
    global _STAMP
    if _STAMP is None:
        from symgraph.backends.native.c_sources import C_SRC

        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        taken = time.time_ns()
        digest, newest = stamp_folders(((package, (".py", ".so")), (C_SRC, None)))
        _STAMP = Stamp(digest, newest, taken)
    return _STAMP
