"""Python text written into generated C: one escaping rule for every generator."""

__all__ = ["c_string"]


def c_string(text, *, printf=False, limit=None, quote=False):
    """``text`` as the body of a C string literal: backslashes and quotes
    escaped, a newline as ``\\n``, other control and non-ASCII characters as
    ``?`` (a raw one would end or corrupt the literal).

    ``printf``: the literal is a printf format, so ``%`` is doubled.
    ``limit``: longer text is cut to that many characters, ending in ``...``.
    ``quote``: wrap the result in double quotes.
    """
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit - 3] + "..."
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "%" and printf:
            out.append("%%")
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.append("?")
    body = "".join(out)
    return f'"{body}"' if quote else body
