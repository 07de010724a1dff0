"""Python text written into generated C: one escaping rule for every generator."""

__all__ = ["c_string"]


def c_string(text, *, printf=False, limit=None, quote=False):
    """``text`` as the body of a C string literal (UTF-8): backslashes, quotes
    and ``?`` (no trigraphs) escaped, a newline as ``\\n``, every other byte
    outside printable ASCII as an octal escape, so the literal holds the text's
    bytes exactly and a raw control character never ends or corrupts it.

    ``printf``: the literal is a printf format, so ``%`` is doubled.
    ``limit``: longer text is cut to that many characters, ending in ``...``.
    ``quote``: wrap the result in double quotes.
    """
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit - 3] + "..."
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '\\"?':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "%" and printf:
            out.append("%%")
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    body = "".join(out)
    return f'"{body}"' if quote else body
