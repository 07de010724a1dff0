"""Configuration flags: a typed registry, its sources and their precedence.

Every flag is declared once, below, with :func:`add_flag`: its name, a one-line doc,
a :class:`Param` that validates and converts values, and whether it changes generated
code (``in_c_key``, which the compile cache hashes through :meth:`Config.c_key`).

Values come from four sources; a later one wins::

    defaults  <  rc files  <  SYMGRAPH_FLAGS  <  code

rc files are the ``os.pathsep``-separated list in ``SYMGRAPHRC`` (later files win; files
that do not exist are skipped, as Theano does), else ``~/.symgraphrc`` when it exists.
They are INI files: ``[global]`` holds plain flags (``floatX = float32``) and a section
such as ``[dnn.conv]`` holds the flags under that prefix (``algo_fwd = fft`` means
``dnn.conv.algo_fwd``).  ``SYMGRAPH_FLAGS`` is ``name=value`` entries separated by
commas (write ``\\,`` for a comma inside a value).

This module is the bottom layer of symgraph: it imports nothing else from the package
but ``configdefaults``, where the flags are declared.
"""

import configparser
import difflib
import functools
import os
import re
from collections import namedtuple

from symgraph.context_map import parse_contexts

__all__ = [
    "ConfigError", "UnknownFlagError", "Param", "EnumParam", "BoolParam", "IntParam",
    "FloatParam", "StrParam", "DeviceParam", "ContextsParam", "parse_contexts", "PathParam",
    "Flag", "FlagInfo",
    "add_flag", "Config", "config", "change_flags", "ENV_FLAGS", "ENV_RC",
]

ENV_FLAGS = "SYMGRAPH_FLAGS"  #: environment variable holding ``name=value,...``
ENV_RC = "SYMGRAPHRC"         #: environment variable holding the rc file list


class ConfigError(ValueError):
    """A flag name, value, rc file or ``SYMGRAPH_FLAGS`` entry that is not valid."""


class UnknownFlagError(ConfigError, AttributeError):
    """A name that no flag has.  Also an AttributeError, so that ``hasattr`` and
    ``getattr(config, name, default)`` behave as Python code expects."""


# ----------------------------------------------------------------------------- params

class Param:
    """Type of a flag: its default, a converter/validator and a text for errors.

    ``default`` may be a callable taking no argument, evaluated when a Config is built,
    for defaults that depend on the machine (the C++ compiler found on ``PATH``).
    """

    kind = "str"

    def __init__(self, default):
        self.default = default

    def default_value(self):
        """The default, computed if it is a callable, and converted."""
        default = self.default() if callable(self.default) else self.default
        return self.convert(default)

    def convert(self, value):
        """Return ``value`` converted to this type; raise ValueError(reason) if bad."""
        raise NotImplementedError

    def allowed(self):
        """Human-readable list of what this type accepts, for error messages."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({self.default!r})"


class EnumParam(Param):
    """One of a fixed set of strings.  The default is always allowed.

    Non-string values are turned into strings first (``None`` -> ``'None'``,
    ``True`` -> ``'True'``), and a value that matches an allowed one except for case is
    accepted as that one: ``optimizer=none`` means ``None``.
    """

    kind = "enum"

    def __init__(self, default, *allowed):
        super().__init__(default)
        self.choices = (default,) + tuple(a for a in allowed if a != default)

    def convert(self, value):
        text = value if isinstance(value, str) else str(value)
        text = text.strip()
        if text in self.choices:
            return text
        folded = [c for c in self.choices if c.lower() == text.lower()]
        if len(folded) == 1:
            return folded[0]
        raise ValueError("not one of the allowed values")

    def allowed(self):
        return ", ".join(self.choices)


class BoolParam(Param):
    """True or False; strings True/False/1/0/true/false/yes/no in any case also work."""

    kind = "bool"
    _WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

    def convert(self, value):
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in self._WORDS:
            return self._WORDS[value.strip().lower()]
        raise ValueError("not a boolean")

    def allowed(self):
        return "True, False (also 1/0, true/false, yes/no)"


class _NumberParam(Param):
    """Shared code of IntParam and FloatParam: parse, then check the bounds."""

    _type = int

    def __init__(self, default, min=None, max=None):  # noqa: A002 - names match brief
        super().__init__(default)
        self.min, self.max = min, max

    def convert(self, value):
        if isinstance(value, bool):  # bool is an int subclass, but True is no size
            raise ValueError(f"not {self._noun()}")
        try:
            number = self._type(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise ValueError(f"not {self._noun()}") from None
        if self._type is int and not isinstance(value, (int, str)) and number != value:
            raise ValueError(f"not {self._noun()}")  # refuse to truncate 2.5 silently
        if (self.min is not None and number < self.min) or \
                (self.max is not None and number > self.max):
            raise ValueError("out of range")
        return number

    def _noun(self):
        return "an integer" if self._type is int else "a number"

    def allowed(self):
        bounds = [f">= {self.min}"] if self.min is not None else []
        bounds += [f"<= {self.max}"] if self.max is not None else []
        return " ".join([self._noun()] + bounds)


class IntParam(_NumberParam):
    """An integer, optionally bounded by ``min`` and ``max`` (inclusive)."""

    kind = "int"
    _type = int


class FloatParam(_NumberParam):
    """A float, optionally bounded by ``min`` and ``max`` (inclusive)."""

    kind = "float"
    _type = float


class StrParam(Param):
    """Any string."""

    kind = "str"

    def convert(self, value):
        if not isinstance(value, str):
            raise ValueError("not a string")
        return value.strip()

    def allowed(self):
        return "any string"


class PathParam(Param):
    """A file-system path: ``~`` is expanded and the path made absolute at once, so a
    later ``os.chdir`` cannot move, say, the compile cache."""

    kind = "path"

    def convert(self, value):
        if not isinstance(value, (str, os.PathLike)) or not str(os.fspath(value)).strip():
            raise ValueError("not a non-empty path")
        return os.path.abspath(os.path.expanduser(str(os.fspath(value)).strip()))

    def allowed(self):
        return "a non-empty file-system path (~ is expanded)"


class DeviceParam(Param):
    """``cpu``, ``cuda`` (the default GPU) or ``cudaN`` (GPU number N)."""

    kind = "device"
    _PATTERN = re.compile(r"cpu|cuda\d*")

    def convert(self, value):
        text = value.strip().lower() if isinstance(value, str) else None
        if text is None or not self._PATTERN.fullmatch(text):
            raise ValueError("not a device name")
        return text

    def allowed(self):
        return "cpu, cuda, cuda0, cuda1, ..."


class ContextsParam(Param):
    """Theano's context map: ``dev0->cuda0;dev1->cuda1`` (context names,
    chosen by the user, mapped to devices); empty: none."""

    kind = "contexts"

    def convert(self, value):
        if not isinstance(value, str):
            raise ValueError("not a string")
        mapping = parse_contexts(value)
        return ";".join(f"{name}->{device}" for name, device in mapping.items())

    def allowed(self):
        return "name->cudaN mappings separated by ';' (dev0->cuda0;dev1->cuda1)"


# ----------------------------------------------------------------------------- registry

class Flag(namedtuple("Flag", "name doc param in_c_key sets")):
    """A declared flag.  ``sets`` names other flags that take its value whenever it is
    set (``dnn.conv.algo_bwd`` sets both backward algorithms)."""


FlagInfo = namedtuple("FlagInfo", "name doc param in_c_key value source default")
FlagInfo.__doc__ = "A flag with its effective value and source, as yielded by Config.flags()."

_FLAGS = {}  # name -> Flag, in declaration order (the order `python -m symgraph config` prints)
_SECTIONS = set()  # every dotted prefix of a declared flag (``dnn``, ``dnn.conv``)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*")


def _prefixes(name):
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def add_flag(name, doc, param, in_c_key=False, sets=()):
    """Declare flag ``name`` once, with a one-line ``doc`` and a :class:`Param`.

    ``in_c_key``: the flag changes generated code or how it is compiled, so its value
    goes into :meth:`Config.c_key`.  ``sets``: names of already-declared flags that are
    set to the same value whenever this one is.  Declare every flag in
    ``symgraph/configdefaults.py``: a
    flag declared after the ``config`` singleton was built gets its default there, as
    rc files and ``SYMGRAPH_FLAGS`` were already checked against the older registry.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"bad flag name {name!r}: dotted identifiers only")
    if name in _FLAGS:
        raise ConfigError(f"flag {name!r} is declared twice")
    if name.split(".")[0] in vars(Config):
        raise ConfigError(f"flag {name!r} would hide Config.{name.split('.')[0]}")
    # `config.a.b` cannot be both a value and a section.  Checked against the
    # set of sections, not every flag's prefixes: import pays this per flag.
    clash = [p for p in sorted(_prefixes(name)) if p in _FLAGS]
    if not clash and name in _SECTIONS:
        clash = [n for n in _FLAGS if name in _prefixes(n)]
    if clash:
        raise ConfigError(f"flag {name!r} clashes with flag {clash[0]!r} as a section")
    for target in sets:
        if target not in _FLAGS:
            raise ConfigError(f"flag {name!r} sets undeclared flag {target!r}")
        for choice in getattr(param, "choices", ()):
            _FLAGS[target].param.convert(choice)  # every value must fit every target
    if param.default is not None and not callable(param.default):
        param.default_value()  # a bad literal default is a bug here, found at import
    flag = Flag(name, doc, param, bool(in_c_key), tuple(sets))
    _FLAGS[name] = flag
    _SECTIONS.update(_prefixes(name))
    return flag


def _suggest(name, candidates):
    """Close matches for a misspelled ``name``: difflib, same case-folded name, or same
    last component (``algo_fwd`` -> ``dnn.conv.algo_fwd``)."""
    low, last = name.lower(), name.rsplit(".", 1)[-1].lower()
    same = [c for c in candidates if c.lower() == low or c.rsplit(".", 1)[-1].lower() == last]
    close = difflib.get_close_matches(name, candidates, n=5, cutoff=0.6)
    return list(dict.fromkeys(same + close))[:5]


def _unknown_flag(name, where=""):
    matches = _suggest(name, list(_FLAGS))
    hint = f"; did you mean: {', '.join(matches)}?" if matches else ""
    return UnknownFlagError(f"unknown flag {name!r}{where}{hint} "
                            "(`python -m symgraph config` lists every flag)")


def _convert(name, value, where):
    """Validate ``value`` for flag ``name``; ``where`` says which source it came from."""
    if name not in _FLAGS:
        raise _unknown_flag(name, where)
    param = _FLAGS[name].param
    try:
        return param.convert(value)
    except ValueError as exc:
        raise ConfigError(f"bad value {value!r} for flag {name!r}{where}: {exc}; "
                          f"allowed: {param.allowed()}") from None


# ----------------------------------------------------------------------------- config

class _Section:
    """``config.dnn.conv``: attribute access to the flags under a dotted prefix."""

    def __init__(self, cfg, prefix):
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "_prefix", prefix)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._cfg._lookup(f"{self._prefix}.{attr}")

    def __setattr__(self, attr, value):
        self._cfg.set(f"{self._prefix}.{attr}", value)

    def __dir__(self):
        start = self._prefix + "."
        return sorted({n[len(start):].split(".")[0] for n in _FLAGS if n.startswith(start)})

    def __repr__(self):
        return f"<symgraph config section {self._prefix!r}>"


class _ChangeFlags:
    """What :meth:`Config.change_flags` returns: a context manager and a decorator."""

    def __init__(self, cfg, changes):
        self._cfg = cfg
        # validated now, so a typo fails where it is written, not at first use
        self._changes = [(n, _convert(n, v, " (in change_flags)")) for n, v in changes]
        self._saved = []  # a stack, so a decorated function may recurse

    def __enter__(self):
        cfg = self._cfg
        names = {t for n, _ in self._changes for t in (n,) + _FLAGS[n].sets}
        self._saved.append({n: cfg._entry(n) for n in names})
        for name, value in self._changes:
            cfg._assign(cfg._state, name, value, "code")
        return cfg

    def __exit__(self, *exc_info):
        self._cfg._state.update(self._saved.pop())  # values and sources both come back
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


class Config:
    """The effective value and source of every flag.

    ``Config()`` reads ``os.environ`` (``SYMGRAPHRC``, ``SYMGRAPH_FLAGS``) and the rc
    files.  Tests pass ``environ`` (a mapping used instead of ``os.environ``) and/or
    ``rc_paths`` (a list of rc files used instead of ``SYMGRAPHRC``/``~/.symgraphrc``;
    ``[]`` reads none).  Flags are attributes: ``config.floatX``,
    ``config.dnn.conv.algo_fwd``; assigning one validates it and records source 'code'.
    """

    def __init__(self, environ=None, rc_paths=None):
        object.__setattr__(self, "_environ", environ)
        object.__setattr__(self, "_rc_paths", None if rc_paths is None else list(rc_paths))
        self.reload()

    # -- loading

    def reload(self):
        """Read defaults, rc files and ``SYMGRAPH_FLAGS`` again; values set in code are
        dropped.  On error, the previous state stays as it was."""
        environ = os.environ if self._environ is None else self._environ
        state = {name: (flag.param.default_value(), "default") for name, flag in _FLAGS.items()}
        defaults = {name: value for name, (value, _) in state.items()}
        rc_files = self._find_rc_files(environ)
        for path in rc_files:
            for name, raw, where in _read_rc(path):
                self._assign(state, name, _convert(name, raw, where), f"rc:{path}")
        for name, raw in _parse_flags_string(environ.get(ENV_FLAGS, "")):
            value = _convert(name, raw, f" (in {ENV_FLAGS})")
            self._assign(state, name, value, ENV_FLAGS)
        object.__setattr__(self, "_defaults", defaults)
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_rc_files", tuple(rc_files))

    def _find_rc_files(self, environ):
        if self._rc_paths is not None:
            paths = self._rc_paths
        elif environ.get(ENV_RC, "").strip():
            paths = environ[ENV_RC].split(os.pathsep)
        else:
            home_rc = os.path.expanduser("~/.symgraphrc")
            object.__setattr__(self, "_rc_missing", ())
            return [home_rc] if os.path.isfile(home_rc) else []
        found, missing = [], []
        for path in (os.fspath(p).strip() for p in paths):
            if not path:
                continue
            full = os.path.abspath(os.path.expanduser(path))
            # As Theano: a listed file that does not exist is skipped (tools start
            # children with placeholder paths), but remembered for `symgraph config`.
            (found if os.path.isfile(full) else missing).append(full)
        object.__setattr__(self, "_rc_missing", tuple(missing))
        return found

    @property
    def rc_files(self):
        """The rc files read, in the order they were applied."""
        return self._rc_files

    @property
    def rc_files_missing(self):
        """The rc files named (in ``SYMGRAPHRC`` or ``rc_paths``) that do not exist
        and were skipped."""
        return self._rc_missing

    # -- reading and writing

    def _entry(self, name):
        """``(value, source)`` of flag ``name``; raises UnknownFlagError."""
        if name not in self._state:  # unknown, or declared after this Config was built
            if name not in _FLAGS:
                raise _unknown_flag(name)
            value = _FLAGS[name].param.default_value()
            self._defaults[name] = value
            self._state[name] = (value, "default")
        return self._state[name]

    @staticmethod
    def _assign(state, name, value, source):
        state[name] = (value, source)
        for target in _FLAGS[name].sets:
            state[target] = (_FLAGS[target].param.convert(value), source)

    def _lookup(self, name):
        if name in _FLAGS:
            return self._entry(name)[0]
        if any(n.startswith(name + ".") for n in _FLAGS):
            return _Section(self, name)
        raise _unknown_flag(name)

    def get(self, name):
        """The value of flag ``name`` (dotted names allowed: ``'dnn.conv.algo_fwd'``)."""
        return self._entry(name)[0]

    def set(self, name, value):
        """Validate ``value`` and make it flag ``name``'s value, with source 'code'."""
        self._assign(self._state, name, _convert(name, value, ""), "code")

    def source(self, name):
        """Where flag ``name``'s value came from: ``'default'``, ``'rc:<path>'``,
        ``'SYMGRAPH_FLAGS'`` or ``'code'``."""
        return self._entry(name)[1]

    def __getattr__(self, attr):
        if attr.startswith("_"):  # private names and dunders: pickle, copy, IPython probes
            raise AttributeError(attr)
        return self._lookup(attr)

    def __setattr__(self, attr, value):
        if attr.startswith("_"):
            object.__setattr__(self, attr, value)
        else:
            self.set(attr, value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n.split(".")[0] for n in _FLAGS})

    def __str__(self):
        """Every flag, as Theano's ``print(config)``: name and type, doc, value
        and (symgraph's addition) where the value came from."""
        blocks = []
        for info in self.flags():
            kind = info.param.kind
            allowed = info.param.allowed() if kind in ("enum", "int", "float") else ""
            blocks.append(f"{info.name} ({kind}{': ' + allowed if allowed else ''})\n"
                          f"    Doc:  {info.doc}\n    Value:  {info.value}\n"
                          f"    Source:  {info.source}\n")
        return "\n".join(blocks)

    def __repr__(self):
        changed = sum(src != "default" for _, src in self._state.values())
        return f"<symgraph Config: {len(_FLAGS)} flags, {changed} not default>"

    # -- bulk

    def change_flags(self, flags=None, **kwargs):
        """Set flags for a ``with`` block or a decorated function, then restore them.

        ``change_flags(floatX='float32')``, ``change_flags({'dnn.conv.algo_fwd': 'fft'})``
        or ``change_flags(dnn__conv__algo_fwd='fft')`` (``__`` stands for ``.``).  Values
        are validated here; values and sources are restored on exit, even on exception.
        """
        changes = list((flags or {}).items())
        changes += [(key.replace("__", "."), value) for key, value in kwargs.items()]
        return _ChangeFlags(self, changes)

    def flags(self):
        """Yield a :class:`FlagInfo` for every declared flag, in declaration order."""
        for name, flag in list(_FLAGS.items()):
            value, source = self._entry(name)
            yield FlagInfo(name, flag.doc, flag.param, flag.in_c_key, value, source,
                           self._defaults[name])

    def c_key(self):
        """``((name, value), ...)`` sorted by name, for every flag that changes
        generated code: the part of the compile-cache key that comes from flags."""
        return tuple((name, self._entry(name)[0])
                     for name in sorted(_FLAGS) if _FLAGS[name].in_c_key)


# ----------------------------------------------------------------------------- parsing

def _parse_flags_string(text):
    """``'a=1, b.c = x'`` -> ``[('a', '1'), ('b.c', 'x')]``; ``\\,`` escapes a comma."""
    entries = []
    for item in re.split(r"(?<!\\),", text):
        item = item.strip().replace("\\,", ",")
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"bad entry {item!r} in {ENV_FLAGS}={text!r}: write "
                              "name=value pairs separated by commas")
        entries.append((key.strip(), value.strip()))
    return entries


def _read_rc(path):
    """Yield ``(flag name, raw value, where)`` for each setting in INI file ``path``."""
    parser = configparser.ConfigParser(
        interpolation=None,                    # '%' is common in compiler flags
        default_section="\0no default",        # a [DEFAULT] section is just misspelled
        inline_comment_prefixes=("#", ";"))
    parser.optionxform = str                   # flag names are case-sensitive (floatX)
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle, source=path)
    except OSError as exc:
        raise ConfigError(f"cannot read rc file {path}: {exc.strerror}") from None
    except configparser.Error as exc:
        raise ConfigError(f"rc file {path} is not a valid INI file: {exc}") from None
    sections = sorted({p for n in _FLAGS for p in _prefixes(n)})
    for section in parser.sections():
        prefix = "" if section == "global" else section + "."
        if prefix and section not in sections:
            matches = _suggest(section, sections)
            hint = f"; did you mean: [{'], ['.join(matches)}]?" if matches else ""
            raise ConfigError(f"rc file {path}: unknown section [{section}]{hint} Valid "
                              f"sections: [global], [{'], ['.join(sections)}]")
        keys = [n[len(prefix):] for n in _FLAGS if n.startswith(prefix)]
        for key, value in parser.items(section, raw=True):
            where = f" (in rc file {path}, section [{section}])"
            if key not in keys:
                matches = _suggest(key, keys)
                hint = f"; did you mean: {', '.join(matches)}?" if matches else ""
                raise UnknownFlagError(f"unknown key {key!r}{where}{hint} Valid keys "
                                       f"there: {', '.join(keys)}")
            yield prefix + key, value, where


# ----------------------------------------------------------------------------- flags

# The declarations live in configdefaults (Theano's module name for them); it uses
# add_flag and the Param classes above, so it is imported only once they exist.
from symgraph import configdefaults  # noqa: E402,F401

#: The configuration of this process, read when symgraph is imported.
config = Config()

#: ``change_flags(...)`` of :data:`config`, as a module-level name (Theano's spelling).
change_flags = config.change_flags
