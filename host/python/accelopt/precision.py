"""The float16 rule (accelopt-facts §2.3), with a real comment stripper.

AccelOpt strips ``#.*`` with a regex (which also eats ``#`` inside strings)
and then rejects any remaining ``float16`` substring. Here comments are removed
with the tokenizer, so strings stay intact (a dtype given as the string
"float16" is still caught); ``bfloat16`` stays banned, as in AccelOpt.
"""
import io
import re
import tokenize

# What a Lua stage may call through accel.python_call (accelopt/lua_calls.py): pure text functions.
LUA_CALLABLE = ("strip_comments", "uses_float16")

BANNED = "float16"


def strip_comments(source):
    """Returns ``source`` (str) without its comments.

    Uses the Python tokenizer; for text that does not tokenize (a syntax
    error) it falls back to AccelOpt's regex ``#.*``.
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"#.*", "", source)
    lines = source.splitlines(keepends=True)
    # Remove comment tokens from the end of their lines (a comment always
    # runs to the end of its line).
    for tok in reversed(tokens):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            line = lines[row - 1]
            newline = "\n" if line.endswith("\n") else ""
            lines[row - 1] = line[:col].rstrip() + newline
    return "".join(lines)


def uses_float16(source):
    """True if ``float16`` (hence also ``bfloat16``) occurs outside comments of ``source``."""
    return BANNED in strip_comments(source)
