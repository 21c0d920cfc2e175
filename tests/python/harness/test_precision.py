"""The float16 rule: comments are ignored, code and strings are not."""
from accelopt import precision


def test_comment_mentions_are_allowed():
    source = "x = 1  # no float16 here\n# bfloat16 neither\ny = 'a'\n"
    assert not precision.uses_float16(source)
    assert "float16" not in precision.strip_comments(source)


def test_code_and_strings_are_caught():
    assert precision.uses_float16("t = nl.ndarray((128, 4), dtype=nl.float16)\n")
    assert precision.uses_float16("t = nl.ndarray((128, 4), dtype=nl.bfloat16)\n")
    assert precision.uses_float16("dt = 'float16'\n")


def test_hash_inside_a_string_does_not_hide_code():
    # AccelOpt's regex strips from '#' inside the string and misses the dtype.
    source = "label = '#tile'; dt = np.float16\n"
    assert precision.uses_float16(source)
    assert precision.strip_comments(source) == source


def test_untokenizable_source_falls_back_to_regex():
    source = "def f(:\n    return np.float16  # float16\n"
    assert precision.uses_float16(source)
    assert not precision.uses_float16("def f(:\n    return 1  # float16\n")
