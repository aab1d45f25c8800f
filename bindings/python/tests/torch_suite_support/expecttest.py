"""The part of PyPI's `expecttest` (not packaged by Debian) that torch's test utilities import:
TestCase with assertExpectedInline, comparing against the inline expectation as written
(dedented), without the package's rewrite-the-source mode. Used only by torch_suite.py."""
import textwrap
import unittest

ACCEPT = False  # expecttest rewrites expectations in place when this is set; never here.


def _normalize(text):
    return textwrap.dedent(text).strip("\n")


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 - expecttest's name.
        self.assertEqual(_normalize(actual), _normalize(expect))

    def assertExpectedRaisesInline(self, exc_type, callable_, expect, *args, **kwargs):  # noqa
        with self.assertRaises(exc_type) as caught:
            callable_(*args, **kwargs)
        self.assertExpectedInline(str(caught.exception), expect)
