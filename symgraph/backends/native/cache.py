"""The on-disk compile cache, shared by every process of a user.

Layout under the root (the ``compiledir`` flag, created 0700)::

    <key[:2]>/<key>/lib.so      a built library (and lib.c, its source)
    <key[:2]>/<key>/meta.json   size and sha256 of lib.so, creation time, key parts;
                                its mtime is the entry's last use (LRU pruning)
    locks/<key>.lock            one lock file per key (fcntl.flock)
    tmp/                        builds in progress, and entries being deleted
    index/<name>.json           small JSON records (the kernel index)
    functions/<key>.pkl         warm-start entries: a function's optimized graph and
                                schedule (``compile/warm_start.py``)
    generated/, tuning/         files other modules keep here (:meth:`ModuleCache.private_folder`)

Keys are content addresses: :func:`make_key` hashes named parts (the source,
the compiler, flags, CPU, NumPy, Python and symgraph versions, the flags that
change code by declaration: see :func:`environment_parts`).

Rules, and why:

- An entry appears only by ``os.rename`` of a finished build folder, so a
  reader sees a whole entry or none, and takes no lock.
- A miss takes the key's lock, looks again, and builds: of N processes needing
  the same key, one compiles and the others wait for it, then load.  Other keys
  are not blocked (no global lock).
- An entry is complete when meta.json parses and lib.so has its size (checked
  on every load) and its sha256 (checked on the first load in this process);
  otherwise it is a miss: removed and rebuilt under the lock.  A killed
  compiler leaves only a folder in ``tmp/``, removed when older than an hour.
- A root or entry folder (or lib.so) that another user owns or that group or
  others may write is refused (:class:`CacheSecurityError`): whoever can write
  there can make this process load their code.  Everything created here is
  private (0700 folders, 0600 files) whatever the umask.
- A library is loaded (:meth:`ModuleCache.load`) while its key's lock is held,
  shared for a hit, exclusive for a build; pruning removes only entries whose
  lock it can take at once, so it never removes a library being loaded.
- After a build, least recently used entries are pruned down to
  ``compile_cache_size_mb``, never the entry just built nor one in use; the
  cache is scanned for that only when a running total of its size, shared by
  the processes, goes over the cap or once a minute (``cache_cap.py``).
  Warm-start entries count towards the cap and are pruned with the libraries,
  least recently used first; one removed is a miss (its function compiles as
  usual), one whose libraries were removed is repaired when next used.
"""

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: fall back to a lock within this process only
    fcntl = None

from symgraph.backends.cpu import compiler
from symgraph.backends.native import cache_cap
from symgraph.backends.native.cache_files import (  # noqa: F401  (re-exported)
    FUNCTIONS, META_NAME, CacheEntry, entry_info, function_entries, scandirs, sha256_file,
    write_private, write_private_atomic)
from symgraph.backends.native.cache_keys import (  # noqa: F401  (re-exported)
    CACHE_FORMAT, summarize_parts, environment_parts, make_key)

__all__ = [
    "CacheError", "CacheSecurityError", "CacheEntry", "ModuleCache", "get_cache",
    "make_key", "environment_parts", "CACHE_FORMAT",
]

LIB_NAME = "lib.so"
TMP_MAX_AGE = 3600.0  # seconds after which a leftover build folder is garbage

_KEY_RE = re.compile(r"[A-Za-z0-9_-]{4,128}")  # no '.', no '/': a plain folder name
_SHARD_RE = re.compile(r"[A-Za-z0-9_-]{2}")
_log = logging.getLogger("symgraph.compile.cache")

OK, MISSING, CORRUPT = "ok", "missing", "corrupt"


class CacheError(RuntimeError):
    """The cache cannot be used as asked (a bad key, a build that made no lib.so)."""


class CacheSecurityError(CacheError):
    """A cache folder or file that another user owns or may write."""


# ----------------------------------------------------------------------------- entries

class ModuleCache:
    """The compile cache under ``root`` (default: the ``compiledir`` flag).

    Use :func:`get_cache` for the shared instance of a root.  Thread safe; safe
    across processes (see the module docstring).
    """

    def __init__(self, root=None):
        from symgraph.configdefaults_theano import effective_compiledir

        self.root = Path(os.path.abspath(os.path.expanduser(str(root or effective_compiledir()))))
        self._root_str = str(self.root)
        self._verified = {}      # key -> (inode, mtime_ns, size, sha256) checked here
        self._mutex = threading.Lock()
        self._thread_locks = {}  # key -> threading.Lock, only where fcntl is missing
        self.hits = 0            # loads of complete entries without building
        self.builds = 0          # entries this object built
        self.ensure_root()

    def __repr__(self):
        return f"<ModuleCache {self.root}>"

    # -- security

    @staticmethod
    def _check_stat(path, st, what):
        if st.st_uid != os.geteuid():
            raise CacheSecurityError(
                f"refusing to use the compile cache {what} {path}: it is owned by uid "
                f"{st.st_uid}, not by you (uid {os.geteuid()}); another user could put "
                f"code there that this process would load. Use a compiledir of your "
                f"own (SYMGRAPH_FLAGS=compiledir=...) or remove {path}.")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise CacheSecurityError(
                f"refusing to use the compile cache {what} {path}: it is writable by "
                f"group or others (mode {stat.S_IMODE(st.st_mode):#o}); another user "
                f"could put code there that this process would load. Fix: "
                f"chmod go-w {path}")

    def ensure_root(self):
        """Create the root (0700) and its subfolders if needed; refuse an unsafe root."""
        root = self.root
        try:
            st = os.stat(root)
        except FileNotFoundError:
            os.makedirs(root, mode=0o700, exist_ok=True)
            st = os.stat(root)
        if not stat.S_ISDIR(st.st_mode):
            raise CacheError(f"the compiledir {root} is not a folder")
        self._check_stat(root, st, "folder")
        for sub in ("tmp", "locks", "index"):
            path = root / sub
            try:
                self._check_stat(path, os.stat(path), "folder")
            except FileNotFoundError:
                os.makedirs(path, mode=0o700, exist_ok=True)

    def _check_root(self):
        """The per-call check: the root is still there, ours and not writable by
        others (one stat; the subfolders were checked when this object was made)."""
        try:
            st = os.stat(self._root_str)
        except FileNotFoundError:  # removed by hand: make it again
            return self.ensure_root()
        self._check_stat(self._root_str, st, "folder")
        if not stat.S_ISDIR(st.st_mode):
            raise CacheError(f"the compiledir {self.root} is not a folder")

    def entry_dir(self, key):
        """The folder of entry ``key`` (which need not exist)."""
        return Path(self._entry_str(key))

    def _entry_str(self, key):
        # strings, not Paths, on the load path: pathlib costs more than the stats
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise CacheError(f"bad cache key {key!r}: 4 to 128 letters, digits, "
                             "'_' or '-' (make_key gives one)")
        return os.path.join(self._root_str, key[:2], key)

    # -- reading

    def _check_entry(self, key):
        """``(status, lib path)``: OK for a complete entry (its use is recorded),
        MISSING, or CORRUPT.  Takes no lock."""
        folder = self._entry_str(key)
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            return MISSING, None
        self._check_stat(folder, st, "entry folder")
        lib, meta_path = os.path.join(folder, LIB_NAME), os.path.join(folder, META_NAME)
        try:
            with open(meta_path, "rb") as handle:
                meta = json.loads(handle.read())
            size, digest = int(meta["size"]), str(meta["sha256"])
            lib_st = os.stat(lib)
        except (OSError, ValueError, KeyError, TypeError):
            return CORRUPT, None
        self._check_stat(lib, lib_st, "library")
        if lib_st.st_size != size:
            return CORRUPT, None
        ident = (lib_st.st_ino, lib_st.st_mtime_ns, size, digest)
        if self._verified.get(key) != ident:  # a dict read is atomic under the GIL
            try:
                if sha256_file(lib) != digest:
                    return CORRUPT, None
            except OSError:
                return CORRUPT, None
            with self._mutex:
                self._verified[key] = ident
        with contextlib.suppress(OSError):
            os.utime(meta_path)  # the LRU clock; a read-only cache still loads
        return OK, Path(lib)

    def get(self, key):
        """The path of entry ``key``'s lib.so if a complete entry exists, else None.
        Never builds, never waits."""
        self._check_root()
        status, lib = self._check_entry(key)
        return lib if status == OK else None

    # -- building

    @contextlib.contextmanager
    def _key_lock(self, key, shared=False):
        """The key's lock: exclusive to build, shared to load a built entry."""
        if fcntl is None:
            with self._mutex:
                lock = self._thread_locks.setdefault(key, threading.RLock())
            with lock:
                yield
            return
        fd = os.open(os.path.join(self._root_str, "locks", f"{key}.lock"),
                     os.O_RDWR | os.O_CREAT, 0o600)
        try:
            # a dead holder's lock is released by the OS
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def get_or_build(self, key, build_fn, parts=None, what=None):
        """The path of entry ``key``'s lib.so, building it first if needed.

        ``build_fn(tmp_dir)`` must write ``lib.so`` into the Path ``tmp_dir`` (with
        :func:`~symgraph.backends.cpu.compiler.compile_library`, say).  ``parts``
        (the key's parts) are summarized into meta.json; ``what`` names the entry in
        the ``compile_no_compile`` error.  A miss waits for the key's lock, so that
        one process builds.  Pruning may remove the file once this returns: to
        load a library, use :meth:`load`.
        """
        return self.load(key, build_fn, loader=Path, parts=parts, what=what)

    def _build_locked(self, key, build_fn, parts, what):
        """(lib path, whether it was built here) of entry ``key``, built unless
        another process built it meanwhile.  The caller holds the key's
        exclusive lock."""
        status, lib = self._check_entry(key)
        if status == OK:
            self.hits += 1
            return lib, False
        if status == CORRUPT:
            _log.warning("compile cache entry %s is incomplete or corrupt: "
                         "rebuilding it", self.entry_dir(key))
            self._remove(self.entry_dir(key))
        return self._build(key, build_fn, parts, what), True

    def load(self, key, build_fn=None, loader=ctypes.CDLL, parts=None, what=None):
        """``loader(path of lib.so)`` for entry ``key``, built first if needed, or
        None when it is missing and ``build_fn`` is None.

        The load happens while the key's lock is held (shared for a hit,
        exclusive right after a build), so that no process prunes the library
        between the check and the load.  Pruning runs after the load: a loaded
        library stays mapped even once its file is gone.
        """
        self._entry_str(key)  # a bad key is refused before it names a lock file
        self._check_root()
        with self._key_lock(key, shared=True):
            status, lib = self._check_entry(key)
            if status == OK:
                self.hits += 1
                return loader(str(lib))
        if build_fn is None:
            return None
        self.ensure_root()
        with self._key_lock(key):
            lib, built = self._build_locked(key, build_fn, parts, what)
            result = loader(str(lib))
        if built:
            entry = entry_info(self.entry_dir(key), False)
            self._enforce_cap(keep=key, added=entry.size if entry else 0)
        return result

    def _build(self, key, build_fn, parts, what):
        tmp = Path(tempfile.mkdtemp(prefix=f"build-{key[:16]}-{os.getpid()}-",
                                    dir=self.root / "tmp"))
        try:
            with compiler.describing(what or f"the cache entry {key}"):
                build_fn(tmp)
            lib = tmp / LIB_NAME
            if not lib.is_file():
                raise CacheError(f"the build of cache entry {key} wrote no {LIB_NAME} "
                                 f"in {tmp}")
            for path in tmp.iterdir():  # whatever the umask, entries are private
                mode = stat.S_IMODE(path.lstat().st_mode)
                if mode & 0o077 and not path.is_symlink():
                    path.chmod(mode & ~0o077)
            size, digest = lib.stat().st_size, sha256_file(lib)
            meta = {"format": CACHE_FORMAT, "key": key, "size": size, "sha256": digest,
                    "created": time.time(), "parts": summarize_parts(parts)}
            write_private(tmp / META_NAME, json.dumps(meta, indent=1, sort_keys=True))
            self._place(key, tmp)
        except compiler.CompileError as exc:
            if exc.source_path is None:  # nothing compiled (compile_no_compile)
                shutil.rmtree(tmp, ignore_errors=True)
            raise  # else keep tmp: the error names the source kept there
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.builds += 1
        final = self.entry_dir(key) / LIB_NAME
        st = os.stat(final)
        with self._mutex:
            self._verified[key] = (st.st_ino, st.st_mtime_ns, size, digest)
        return final

    def _place(self, key, tmp):
        """Rename the finished build folder ``tmp`` into place (atomic)."""
        final = self.entry_dir(key)
        os.makedirs(final.parent, mode=0o700, exist_ok=True)
        self._check_stat(final.parent, os.stat(final.parent), "folder")
        try:
            os.rename(tmp, final)
            return
        except OSError:
            # an entry is there although we hold the lock (a lock file removed by
            # `clear` under a waiting process): keep a complete one, replace another
            if self._check_entry(key)[0] == OK:
                shutil.rmtree(tmp, ignore_errors=True)
                return
            self._remove(final)
        os.rename(tmp, final)

    def _remove(self, folder):
        """Delete ``folder``: renamed out of sight first (atomic), then removed."""
        trash = self.root / "tmp" / f"trash-{folder.name}-{os.getpid()}-{time.monotonic_ns()}"
        try:
            os.rename(folder, trash)
        except FileNotFoundError:
            return False
        with self._mutex:
            self._verified.pop(folder.name, None)
        shutil.rmtree(trash, ignore_errors=True)
        return True

    # -- listing and pruning

    def list_entries(self, details=False):
        """Every entry (complete or not) as a :class:`CacheEntry`, least recently
        used first.  ``details`` reads each meta.json (key parts summary)."""
        entries = []
        for shard in scandirs(self.root):
            if not _SHARD_RE.fullmatch(shard.name):
                continue
            for folder in scandirs(shard.path):
                entry = entry_info(Path(folder.path), details)
                if entry is not None:
                    entries.append(entry)
        entries.sort(key=lambda e: (e.last_used, e.key))
        return entries

    def prune(self, max_bytes=None, keep=()):
        """Remove least recently used entries until the total is at most
        ``max_bytes`` (default: the ``compile_cache_size_mb`` flag), never those
        whose key is in ``keep``; also remove build folders older than an hour.
        Returns the removed entries."""
        return self._prune(max_bytes, keep)[0]

    def _prune(self, max_bytes=None, keep=()):
        """:meth:`prune`, returning (the removed entries, the size left)."""
        from symgraph.config import config

        self.ensure_root()
        if max_bytes is None:
            max_bytes = config.compile_cache_size_mb * 2**20
        keep = {keep} if isinstance(keep, str) else set(keep)
        self.clean_tmp()
        functions = function_entries(self._root_str)
        entries = sorted(self.list_entries() + functions, key=lambda e: (e.last_used, e.key))
        functions = {id(e) for e in functions}
        total = sum(e.size for e in entries)
        removed = []
        for entry in entries:
            if total <= max_bytes:
                break
            if entry.key in keep or not _KEY_RE.fullmatch(entry.key):
                continue
            if id(entry) in functions:
                # a single file that readers check whole: no lock to take
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(entry)
                total -= entry.size
                continue
            gone = self._remove_unless_busy(entry)
            if gone is None:
                continue  # in use: prune it another time
            if gone:
                removed.append(entry)
            total -= entry.size
        return removed, total

    def _remove_unless_busy(self, entry):
        """Remove a pruned entry unless its lock is held (a process is loading or
        building it): True when removed, False when it was gone already, None when
        it is in use.  The lock file goes too, unlinked while
        held, so that ``locks/`` does not grow forever; a process that opened it
        just before finds the entry gone once it gets the lock, and rebuilds."""
        if fcntl is None:
            return self._remove(entry.path)
        lock = os.path.join(self._root_str, "locks", f"{entry.key}.lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return None
            removed = self._remove(entry.path)
            with contextlib.suppress(OSError):
                os.unlink(lock)
            return removed
        finally:
            os.close(fd)

    def note_added(self, size, keep=()):
        """Count an entry of ``size`` bytes just written (a warm-start function)
        towards the size cap, pruning when the cache goes over it."""
        self._enforce_cap(keep=keep, added=size)

    def _enforce_cap(self, keep, added):
        # A running total shared by the processes (cache_cap.py) says when to
        # scan: a scan per build cost seconds in a cache of many entries.
        from symgraph.config import config

        def scan():
            removed, total = self._prune(keep=keep)
            if removed:
                _log.info("compile cache: pruned %d least recently used entries",
                          len(removed))
            return total

        try:
            cache_cap.note_added(self._root_str, added,
                                 config.compile_cache_size_mb * 2**20, scan)
        except OSError as exc:  # pruning is housekeeping: never fail a build over it
            _log.warning("pruning the compile cache %s failed: %s", self.root, exc)

    def clean_tmp(self, max_age=TMP_MAX_AGE):
        """Remove folders in ``tmp/`` untouched for ``max_age`` seconds (left by killed
        or failed builds).  Returns how many were removed."""
        count, limit = 0, time.time() - max_age
        for folder in scandirs(self.root / "tmp"):
            with contextlib.suppress(OSError):
                if folder.stat(follow_symlinks=False).st_mtime < limit:
                    shutil.rmtree(folder.path, ignore_errors=True)
                    count += 1
        return count

    def clear(self):
        """Remove every entry, index record, build folder and lock file (the root
        stays).  Returns the number of entries removed."""
        self.ensure_root()
        count = sum(self._remove(entry.path) for entry in self.list_entries())
        for shard in scandirs(self.root):
            if _SHARD_RE.fullmatch(shard.name):
                with contextlib.suppress(OSError):
                    os.rmdir(shard.path)  # only if empty: a racing build may add to it
        for entry in function_entries(self._root_str):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        for sub in ("index", "locks"):
            for item in list(os.scandir(self.root / sub)):
                with contextlib.suppress(OSError):
                    os.unlink(item.path)
        with contextlib.suppress(OSError):   # the running total of the size cap
            os.unlink(self.root / cache_cap.STATE_NAME)
        self.clean_tmp(max_age=300)  # spare the build folders of running builds
        with self._mutex:
            self._verified.clear()
        return count

    def stats(self):
        """A dict: root, entries, bytes, cap_bytes, oldest and newest last use
        (seconds since the epoch, None when empty), index records, build folders."""
        from symgraph.config import config

        self.ensure_root()
        entries = self.list_entries()
        functions = function_entries(self._root_str)
        return {
            "root": str(self.root),
            "entries": len(entries),
            "bytes": sum(e.size for e in entries),
            "cap_bytes": config.compile_cache_size_mb * 2**20,
            "oldest": entries[0].last_used if entries else None,
            "newest": entries[-1].last_used if entries else None,
            "incomplete": sum(not e.complete for e in entries),
            "index_records": sum(1 for _ in os.scandir(self.root / "index")),
            "tmp_folders": sum(1 for _ in os.scandir(self.root / "tmp")),
            "functions": len(functions),
            "functions_bytes": sum(e.size for e in functions),
        }

    # -- folders other modules keep in the cache

    def private_folder(self, *names):
        """``root/names...``, each level created 0700 when missing and refused
        (:class:`CacheSecurityError`) when another user owns it or may write it:
        whatever is there is compiled or trusted by this process."""
        self._check_root()
        path = self._root_str
        for name in names:
            if not name or name in (".", "..") or "/" in name:
                raise CacheError(f"bad folder name {name!r} in the compile cache")
            path = os.path.join(path, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(path, 0o700)
                st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                raise CacheSecurityError(f"refusing to use {path} in the compile cache: it "
                                         "is not a folder (a link or a file is there)")
            self._check_stat(path, st, "folder")
        return Path(path)

    def check_private_file(self, path):
        """Refuse (:class:`CacheSecurityError`) a file another user owns or may
        write, or a link; True when ``path`` exists, False when it does not."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode):
            raise CacheSecurityError(f"refusing to use {path} in the compile cache: it is "
                                     "not a plain file")
        self._check_stat(path, st, "file")
        return True

    # -- the kernel index

    def _index_path(self, name_key):
        name = name_key if _KEY_RE.fullmatch(name_key) else \
            hashlib.sha256(name_key.encode("utf-8", "surrogatepass")).hexdigest()
        return self.root / "index" / f"{name}.json"

    def lookup(self, name_key):
        """The dict recorded under ``name_key``, or None (absent, unreadable or
        garbage: all a miss)."""
        self._check_root()
        path = self._index_path(name_key)
        try:
            record = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        if (not isinstance(record, dict) or record.get("name_key") != name_key
                or record.get("format") != CACHE_FORMAT
                or not isinstance(record.get("value"), dict)):
            return None
        return record["value"]

    def record(self, name_key, value):
        """Store the JSON-able dict ``value`` under ``name_key`` (atomic replace)."""
        if not isinstance(value, dict):
            raise TypeError(f"an index record is a dict, not {type(value).__name__}")
        self.ensure_root()
        path = self._index_path(name_key)
        text = json.dumps({"format": CACHE_FORMAT, "name_key": name_key, "value": value},
                          sort_keys=True)
        write_private_atomic(path, text)


_caches = {}
_caches_lock = threading.Lock()


def get_cache(root=None):
    """The shared :class:`ModuleCache` of ``root`` (default: the ``compiledir`` flag,
    read at each call, so ``change_flags(compiledir=...)`` takes effect; Theano's
    ``base_compiledir`` and ``compiledir_format`` name it when it was not set)."""
    from symgraph.configdefaults_theano import effective_compiledir

    path = os.path.abspath(os.path.expanduser(str(root or effective_compiledir())))
    with _caches_lock:
        cache = _caches.get(path)
        if cache is None:
            cache = _caches[path] = ModuleCache(path)
    return cache
