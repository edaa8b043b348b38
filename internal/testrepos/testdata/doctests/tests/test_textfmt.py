import doctest

import textfmt


def test_testmod():
    result = doctest.testmod(textfmt)
    assert result.failed == 0
    assert result.attempted == 4


def test_run_docstring_examples():
    doctest.run_docstring_examples(textfmt.pad, {"pad": textfmt.pad})
    assert textfmt.pad("x", 3) == ".x."


def test_shout():
    assert textfmt.shout("a") == "A!"
