"""How ``genui serve`` logs: uvicorn's configuration, each line with its time, genui's own loggers, and a client's
malformed WebSocket messages said in one line a minute (uvicorn logs each with a traceback)."""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

import uvicorn

# uvicorn's words when a WebSocket text message is not UTF-8; it closes the socket with 1007, and logs a traceback
BAD_UTF8 = "Invalid UTF-8 sequence received from client."
QUIET_S = 60.0  # a message a client can send at will is logged once in this many seconds


class OncePerWhile(logging.Filter):
    """Lets a record whose message is ``message`` through once every ``seconds``, without its traceback, saying how
    many it held back since; others pass as they are. Any client can send uvicorn's invalid-UTF-8 message as fast
    as it likes, and each was seven lines of traceback in the log."""

    def __init__(self, message: str = BAD_UTF8, seconds: float = QUIET_S) -> None:
        super().__init__()
        self.message, self.seconds = message, seconds
        self.held = 0
        self.last = -float("inf")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != self.message:
            return True
        now = time.monotonic()
        if now - self.last < self.seconds:
            self.held += 1
            return False
        record.exc_info, record.exc_text = None, None  # a client's bad message, not a fault of the server
        if self.held:
            record.msg = f"{self.message} ({self.held} more in the last {now - self.last:.0f} s, not logged)"
        self.last, self.held = now, 0
        return True


class NoRequestLines(logging.Filter):
    """Holds back uvicorn's line for each WebSocket a client opens (its address, the page's URL, the time), which
    uvicorn logs as a server message, not as an access line: ``--no-access-log`` still logged every page a browser
    with scripts opened (a data-protection review)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith('%s - "WebSocket '))


class AccessFields(logging.Filter):
    """uvicorn's access line's parts as fields of their own, for a JSON log (``--log-format json``): ``client``,
    ``method``, ``path`` (with its query) and ``status``, where a log store reads them without parsing the line.
    A WebSocket's line (uvicorn logs it as a server message) has them too: method "WebSocket", status 101 where
    it was accepted (HTTP's Switching Protocols), else the status it was refused with."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) == 5 and record.name == "uvicorn.access":  # uvicorn's (client, method, path, http, status)
            record.client, record.method, record.path, _, record.status = args
        elif isinstance(record.msg, str) and record.msg.startswith('%s - "WebSocket %s"') and len(args) >= 2:
            record.client, record.path, record.method = args[0], args[1], "WebSocket"
            record.status = args[2] if len(args) > 2 else 403 if record.msg.endswith(" 403") else 101
        return True


# a JSON log line's fields, as python-json-logger writes them: one object a line, its time in ISO 8601 (UTC)
JSON_FORMATTER = {
    "()": "genui.logs.json_formatter",
    "fmt": "%(levelname)s %(name)s %(message)s",
    "rename_fields": {"levelname": "level", "name": "logger"},
    "timestamp": "time",
}


def json_formatter(**options: Any) -> logging.Formatter:
    """python-json-logger's formatter, leaving out uvicorn's ``color_message`` (its message again, in terminal
    colours' escapes)."""
    from pythonjsonlogger.core import RESERVED_ATTRS
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter(**options, reserved_attrs=[*RESERVED_ATTRS, "color_message"])


def server_log_config(developing: bool, access_log: bool = True, form: str = "text") -> dict[str, Any]:
    """uvicorn's logging configuration for ``genui serve``; ``developing`` (``--reload``) also logs what genui does;
    without ``access_log`` no line names a request, a WebSocket's included; ``form`` "json": each line a JSON object
    (``JSON_FORMATTER``), an access line's parts among its fields (``AccessFields``)."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    if form == "json":
        config["formatters"] = {name: dict(JSON_FORMATTER) for name in config["formatters"]}
        config.setdefault("filters", {})["genui_access_fields"] = {"()": AccessFields}
        config["handlers"]["access"]["filters"] = ["genui_access_fields"]
        # what other libraries say (transformers' own handler, Python's warnings) in the same lines, not as text
        logging.captureWarnings(True)
        for name in ("transformers", "py.warnings"):
            config["loggers"][name] = {"handlers": ["default"], "level": "WARNING", "propagate": False}
    else:
        for formatter in config["formatters"].values():  # each line with its time, as a server's log has it
            formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
    info = {"handlers": ["default"], "level": "INFO", "propagate": False}
    config["loggers"]["genui.model"] = info  # loading the model, and when it is ready
    # the page cache a server opens (new or not: a --db with a typo served an empty one unsaid), and what it does to
    # it by itself (threads carried to a new config, posts moved to a page's new address): an operator's to know
    config["loggers"]["genui.cache"] = info
    # genui's warnings and errors (a template that fails, a cache that cannot store) always, with their level and
    # time (they went to Python's last resort, bare); a developer at work (--reload) is also told what genui does
    # (reloads, pages read ahead)
    config["loggers"]["genui"] = {**info, "level": "INFO" if developing else "WARNING"}
    # the engine's (a batch that failed, its threads): with their level and time too, not Python's last resort's
    config["loggers"]["engine"] = {**info, "level": "WARNING"}
    config.setdefault("filters", {})["genui_quiet"] = {"()": OncePerWhile}
    filters = ["genui_quiet"]
    if not access_log:
        config["filters"]["genui_no_requests"] = {"()": NoRequestLines}
        filters.append("genui_no_requests")
    if form == "json":
        filters.append("genui_access_fields")  # a WebSocket's line, uvicorn's server message, with its fields
    config["loggers"]["uvicorn.error"] = {**config["loggers"]["uvicorn.error"], "filters": filters}
    return config
