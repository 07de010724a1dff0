"""Static C kept in files under ``c_src/``, not in Python strings.

Generators read their fixed C (helper functions, loop bodies, support code)
with :func:`c_file`.  One templating convention for the parts that vary:
``string.Template`` placeholders (``$T``, ``${T}``; ``$$`` is a literal
``$``), filled by keyword arguments; a placeholder left unfilled is an error
naming the file, never C with a ``$`` in it.  Files are read once per process.
"""

import functools
import string

from symgraph.backends.native.c_sources import C_SRC

__all__ = ["c_file"]


@functools.lru_cache(maxsize=None)
def _read(path):
    return (C_SRC / path).read_text()


def c_file(path, **values):
    """The text of ``c_src/<path>``, with its ``$`` placeholders filled from
    ``values`` when any are given (all of them must be)."""
    text = _read(path)
    if not values:
        return text
    try:
        return string.Template(text).substitute(values)
    except (KeyError, ValueError) as exc:
        raise ValueError(f"c_src/{path}: placeholder {exc} not filled "
                         f"(given: {sorted(values)})") from None
