"""``python -m symgraph cache [list|stats|prune|clear]``: the compile cache's command."""

import argparse
import sys
import time


def _when(seconds):
    if seconds is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _size(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return str(nbytes)


def _list(cache, args):
    entries = cache.list_entries(details=args.verbose)
    print(f"# {cache.root}: {len(entries)} entries, least recently used first")
    for entry in entries:
        state = "" if entry.complete else "  (incomplete)"
        print(f"{entry.key[:16]}  {_size(entry.size):>10}  used {_when(entry.last_used)}"
              f"  created {_when(entry.created)}{state}")
        if args.verbose:
            for name, value in sorted(entry.meta.get("parts", {}).items()):
                print(f"    {name}: {value}")
    return 0


def _stats(cache, args):
    info = cache.stats()
    print(f"root:          {info['root']}")
    print(f"entries:       {info['entries']} ({info['incomplete']} incomplete)")
    print(f"size:          {_size(info['bytes'])} of a {_size(info['cap_bytes'])} cap")
    print(f"oldest use:    {_when(info['oldest'])}")
    print(f"newest use:    {_when(info['newest'])}")
    print(f"index records: {info['index_records']}")
    print(f"functions:     {info['functions']} warm-start entries "
          f"({_size(info['functions_bytes'])})")
    print(f"build folders: {info['tmp_folders']}")
    return 0


def _prune(cache, args):
    max_bytes = None if args.max_mb is None else int(args.max_mb * 2**20)
    removed = cache.prune(max_bytes=max_bytes)
    print(f"removed {len(removed)} entries ({_size(sum(e.size for e in removed))}); "
          f"{_size(cache.stats()['bytes'])} left")
    return 0


def _clear(cache, args):
    count = cache.clear()
    print(f"removed {count} entries from {cache.root}")
    return 0


def main(argv):
    """Run the ``cache`` command with arguments ``argv``; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m symgraph cache",
        description="Inspect and manage the compile cache (the compiledir flag). "
                    "Without an action, print its stats.")
    parser.add_argument("--dir", help="the cache folder (default: the compiledir flag)")
    actions = parser.add_subparsers(dest="action", metavar="action")
    p_list = actions.add_parser("list", help="list the entries, least recently used first")
    p_list.add_argument("-v", "--verbose", action="store_true",
                        help="also print each entry's key parts")
    actions.add_parser("stats", help="entries, total size, oldest and newest use")
    p_prune = actions.add_parser("prune", help="remove least recently used entries "
                                 "down to the size cap, and stale build folders")
    p_prune.add_argument("--max-mb", type=float, default=None,
                         help="the size to prune down to, in MiB (default: the "
                              "compile_cache_size_mb flag)")
    actions.add_parser("clear", help="remove every entry, index record and warm-start "
                       "entry")
    args = parser.parse_args(argv)

    from symgraph.backends.native.cache import CacheError, ModuleCache

    try:
        cache = ModuleCache(args.dir)
        action = {"list": _list, "stats": _stats, "prune": _prune, "clear": _clear,
                  None: _stats}[args.action]
        return action(cache, args)
    except (CacheError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
