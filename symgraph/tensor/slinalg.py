"""Theano's ``tensor.slinalg`` import path: Cholesky, ``solve`` (general,
triangular, symmetric), generalized ``eigvalsh``, ``kron`` and ``expm`` (the
ops live in ``symgraph.ops.linalg``)."""

from symgraph.ops.linalg import (Cholesky, Eigvalsh, Expm, Solve, cholesky,  # noqa: F401
                                 eigvalsh, expm, kron, solve, solve_lower_triangular,
                                 solve_symmetric, solve_upper_triangular)

__all__ = ["Cholesky", "Eigvalsh", "Expm", "Solve", "cholesky", "eigvalsh", "expm", "kron",
           "solve", "solve_lower_triangular", "solve_symmetric", "solve_upper_triangular"]
