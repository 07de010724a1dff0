"""The compile cache's size cap without a scan of the whole cache per build.

Enforcing the cap means listing every entry (a few stats each): about a
millisecond per thousand entries, and a cache that a user keeps for months
holds tens of thousands (libraries and warm-start functions): seconds, paid
by every build when each build scanned.  So the processes sharing a cache
keep a running total of its size in ``cap.json`` (changed under the lock
``locks/cap.lock``): each entry written adds its size, and the cache is
scanned (and pruned) only when that total goes over the cap or the last scan
is older than :data:`SCAN_SECONDS` (which catches what the total does not
see: entries removed by hand, sizes of other versions of symgraph).  The cap
then holds once all processes stop, as before.  A missing or damaged state
file is rebuilt by a scan.
"""

import json
import math
import os
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

__all__ = ["note_added", "SCAN_SECONDS", "STATE_NAME"]

#: The longest time between two scans of the whole cache.
SCAN_SECONDS = 60.0
#: The running total's file in the cache's root.
STATE_NAME = "cap.json"


def _read(root):
    """(total bytes, time of the last scan) from the state file, or None."""
    try:
        with open(os.path.join(root, STATE_NAME), "rb") as handle:
            state = json.loads(handle.read(4096))
        total, scanned = int(state["total"]), float(state["scanned"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if total < 0 or not math.isfinite(scanned):
        return None
    return total, scanned


def _write(root, total, scanned):
    from symgraph.backends.native.cache_files import write_private_atomic

    write_private_atomic(os.path.join(root, STATE_NAME),
                         json.dumps({"total": int(total), "scanned": scanned}))


def note_added(root, size, cap_bytes, scan):
    """Count ``size`` more bytes in the cache at ``root``; when that takes the
    running total over ``cap_bytes``, or the last scan is older than
    SCAN_SECONDS (or unknown), call ``scan()``, which prunes the cache and
    returns its size after pruning.  Processes take turns (a file lock)."""
    fd = os.open(os.path.join(root, "locks", "cap.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        now = time.time()
        state = _read(root)
        if state is not None:
            total, scanned = state[0] + max(0, int(size)), state[1]
            if total <= cap_bytes and 0 <= now - scanned < SCAN_SECONDS:
                _write(root, total, scanned)
                return False
        _write(root, scan(), now)
        return True
    finally:
        os.close(fd)
