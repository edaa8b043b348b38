# Needs a dependency the repository does not provide: this file fails to collect, the others run.
import ndtrace_optional_dependency


def test_uses_it():
    assert ndtrace_optional_dependency.VERSION
