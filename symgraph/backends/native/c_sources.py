"""Where symgraph's C sources are (the headers, templates and C files that
kernels include or that are compiled at run time).

They live in ``c_src/`` at the repository's top level.  A wheel or an sdist
install carries a copy inside the package (``symgraph/c_src``, mapped there by
``setup.py``'s build step); a source checkout or an editable install (``pip
install -e .``) uses the repository's own folder, beside the package.  The
installed copy is looked for first, so an installed symgraph never reads
outside its own package.
"""

from pathlib import Path

__all__ = ["C_SRC", "find_c_src"]

_PACKAGE = Path(__file__).resolve().parents[2]   # the symgraph package folder


def find_c_src():
    """The folder of the C sources: the package's copy, else the checkout's
    (the package's path when neither exists, so that errors name it)."""
    for candidate in (_PACKAGE / "c_src", _PACKAGE.parent / "c_src"):
        if (candidate / "sg_kernel.h").is_file():
            return candidate
    return _PACKAGE / "c_src"


#: The folder of the C sources, found once at import.
C_SRC = find_c_src()
