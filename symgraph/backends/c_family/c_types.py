"""C spellings of symgraph's dtypes, shared by every code generator.

bool is stored as one byte (0 or 1), float16 as GCC's ``_Float16`` (computed in
float32 by the generators).  Complex dtypes have no native code: their nodes
run in Python.
"""

C_TYPES = {
    "bool": "uint8_t",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "_Float16", "float32": "float", "float64": "double",
}

#: The C type arithmetic on a dtype is done in (float16 in float32).
C_COMPUTE_TYPES = dict(C_TYPES, float16="float")

#: The float dtypes with native code.
FLOAT_DTYPES = ("float16", "float32", "float64")

#: Per float dtype, the suffixes of the C helpers that store and compute it
#: (``sg_softmax_f16`` stores float16 and computes in float32: ``f32``).
FLOAT_SUFFIXES = {"float16": ("f16", "f32"), "float32": ("f32", "f32"),
                  "float64": ("f64", "f64")}

#: The C type of each compute suffix.
SUFFIX_C_TYPES = {"f32": "float", "f64": "double"}


def c_type(dtype):
    """The C storage type of ``dtype``; KeyError for dtypes without native code."""
    return C_TYPES[str(dtype)]


def c_compute_type(dtype):
    """The C type arithmetic on ``dtype`` is done in (float16 in ``float``)."""
    return C_COMPUTE_TYPES[str(dtype)]


def has_c_type(dtype):
    """True when ``dtype`` has native code (every dtype but complex and object)."""
    return str(dtype) in C_TYPES


def c_literal(value, dtype):
    """``value`` as a C literal of ``dtype`` (float32 literals get an f suffix,
    so that float32 code is not computed through double)."""
    import math

    dtype = str(dtype)
    if dtype == "bool":
        return "1" if value else "0"
    if dtype.startswith(("int", "uint")):
        suffix = "LL" if dtype in ("int64",) else ("ULL" if dtype == "uint64" else "")
        return f"{int(value)}{suffix}"
    v = float(value)
    if math.isnan(v):
        return "(NAN)" if dtype != "float64" else "((double)NAN)"
    if math.isinf(v):
        return ("-" if v < 0 else "") + ("INFINITY" if dtype != "float64" else "((double)INFINITY)")
    text = repr(v)
    if "e" not in text and "." not in text:
        text += ".0"
    return text + ("f" if dtype in ("float32", "float16") else "")
