"""Command line: ``python -m symgraph <command> [args]``.

Each command is one function registered with :func:`command`; it gets the remaining
arguments and returns the exit status.  To add one (``cache``, say), write here::

    @command("cache", "list, prune or clear the compile cache")
    def _cache(argv):
        from symgraph.compile.cache import main   # imported lazily: `config` stays fast
        return main(argv)
"""

import argparse
import sys

COMMANDS = {}  # name -> (function, one-line help), in registration order


def command(name, help_text):
    """Decorator: register ``func(argv) -> int`` as subcommand ``name``."""
    def register(func):
        if name in COMMANDS:
            raise ValueError(f"command {name!r} is registered twice")
        COMMANDS[name] = (func, help_text)
        return func
    return register


def usage():
    """The top-level usage text, listing every registered command."""
    lines = ["usage: python -m symgraph <command> [args]", "", "commands:"]
    lines += [f"  {name:<10} {help_text}" for name, (_, help_text) in COMMANDS.items()]
    lines += ["", "`python -m symgraph <command> -h` describes a command."]
    return "\n".join(lines)


def _format_value(value):
    # an empty string printed bare looks like a missing value
    return "''" if value == "" else str(value)


def _format_type(param):
    if param.kind in ("enum", "device"):
        return f"{param.kind}: {param.allowed()}"
    return param.allowed() if param.kind in ("int", "float") else param.kind


@command("config", "print every flag's effective value, its type and where it came from")
def _config(argv):
    parser = argparse.ArgumentParser(
        prog="python -m symgraph config",
        description="Print every flag's effective value, type and allowed values, and "
                    "its source: default, rc:<file>, SYMGRAPH_FLAGS or code.")
    parser.add_argument("names", nargs="*", help="only these flags (default: all)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also print each flag's doc and whether it is in the C key")
    args = parser.parse_args(argv)
    from symgraph.config import ConfigError, config  # imported here: the bottom layer

    infos = list(config.flags())
    if args.names:
        try:
            for name in args.names:
                config.get(name)  # an unknown name gets the error with close matches
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        infos = [info for info in infos if info.name in set(args.names)]
    print(f"# rc files: {', '.join(config.rc_files) or '(none)'}")
    if config.rc_files_missing:
        print(f"# rc files skipped (they do not exist): {', '.join(config.rc_files_missing)}")
    width = max(len(info.name) for info in infos)
    vwidth = min(24, max(len(_format_value(info.value)) for info in infos))
    for info in infos:
        print(f"{info.name:<{width}} = {_format_value(info.value):<{vwidth}}  "
              f"[{info.source}]  ({_format_type(info.param)})")
        if args.verbose:
            key = "in C key" if info.in_c_key else "not in C key"
            print(f"{'':<{width}}   {info.doc} Default {_format_value(info.default)}; "
                  f"{key}.")
    return 0


@command("cache", "list, show stats of, prune or clear the compile cache")
def _cache(argv):
    from symgraph.backends.native.cache_cli import main as cache_main  # lazy: stays fast
    return cache_main(argv)


def main(argv=None):
    """Dispatch ``argv`` (default ``sys.argv[1:]``) to a command; return its status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        if argv:
            print(f"error: unknown command {argv[0]!r}", file=sys.stderr)
        print(usage(), file=sys.stderr)
        return 2
    func, _ = COMMANDS[argv[0]]
    return func(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
