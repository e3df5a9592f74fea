from __future__ import annotations

import logging
import sys

from genui.logs import BAD_UTF8, OncePerWhile


def _record(message: str) -> logging.LogRecord:
    try:
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    except UnicodeDecodeError:
        return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, message, None, sys.exc_info())


def test_a_message_any_client_can_cause_is_let_through_once_a_while_counting_the_rest() -> None:
    quiet = OncePerWhile(seconds=60)
    first = _record(BAD_UTF8)
    assert quiet.filter(first) and first.exc_info is None  # one line, no traceback
    assert not any(quiet.filter(_record(BAD_UTF8)) for _ in range(5))
    other = _record("Exception in ASGI application\n")
    assert quiet.filter(other) and other.exc_info is not None  # the server's own faults keep their tracebacks
    quiet.last -= 61  # a minute on
    later = _record(BAD_UTF8)
    assert quiet.filter(later) and later.getMessage().startswith(f"{BAD_UTF8} (5 more in the last 61 s, not logged)")
