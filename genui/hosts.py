"""The names a server answers for: a guard against DNS rebinding.

A page on another site can have its own name resolve to 127.0.0.1 and then read and post to a genui served there as
if it were that site: the browser sends the attacker's name as the Host, and the Origin matches it, so the same-origin
check (genui.inputs.same_origin) passes. A request whose Host names no name the server answers for is refused
before it reaches a site: a 400 saying which names it answers for and how to add one, and a WebSocket closed before
it opens. ``genui serve`` bound to a loopback address answers for ``localhost``, ``127.0.0.1`` and ``::1``, and the
names ``--allowed-host`` adds (a reverse proxy's public name); bound to any other address, for every name unless
``--allowed-host`` names them.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

ANY = "*"  # --allowed-host '*': every name
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_LOGGED_MOST = 100  # distinct refused names logged, so that a scanner cannot fill the log
log = logging.getLogger("genui")


def is_loopback(address: str) -> bool:
    """Whether a server bound to ``address`` is reached only from this machine (``127.0.0.1``, ``::1``,
    ``localhost``)."""
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:  # a name other than localhost: it may resolve anywhere
        return False


def allowed_hosts(bound: str, named: Collection[str]) -> frozenset[str] | None:
    """The names a server bound to ``bound`` answers for, given those ``--allowed-host`` named; None for any. The
    loopback names are always among them (no page on another site can send them as its Host: its name is its own),
    and so is the address it is bound to (`--host 127.0.0.2` answers for http://127.0.0.2:8000)."""
    if ANY in named or (not named and not is_loopback(bound)):
        return None
    own = [_address(bound)] if bound and _address(bound) not in ("0.0.0.0", "::") else []
    return frozenset(host_name(name) for name in [*named, *LOOPBACK_NAMES, *own])


def _address(host: str) -> str:
    """An address as a Host header names it (``0:0:0:0:0:0:0:1`` is ``::1``); a name as it is, in lower case."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return host.lower()


def host_name(host: str) -> str:
    """A Host header's name, without its port or an IPv6 address's brackets, in lower case, an address in its
    shortest form."""
    host = host.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:  # name:port (an IPv6 address unbracketed has several)
        host = host.partition(":")[0]
    return _address(host) if host else host


class HostCheck:
    """Refuses HTTP requests and WebSockets whose Host header names none of ``hosts`` (lower case, no port).

    Starlette's TrustedHostMiddleware does the same check, but answers a bare "Invalid host header" that names no
    fix and logs nothing; behind a proxy an operator who left out --allowed-host would see only that on every page.
    """

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.logged: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        asked = Headers(scope=scope).get("host", "")
        name = host_name(asked)
        if name in self.hosts or not asked:  # no Host (HTTP/1.0, a proxy's health check): no browser's request
            await self.app(scope, receive, send)
            return
        if len(self.logged) < _LOGGED_MOST and name not in self.logged:
            self.logged.add(name)
            log.warning(
                "refused a request for host %r: if that is this server's own name (behind a reverse proxy, say),"
                " serve with --allowed-host %s",
                asked,
                name or "NAME",
            )
        if scope["type"] == "websocket":
            await WebSocketClose(code=1008)(scope, receive, send)
            return
        answers = ", ".join(sorted(self.hosts))
        message = (
            f"This server does not answer for the host {asked!r}: it answers for {answers}. If that is its own name"
            f" (behind a reverse proxy, say), serve it with genui serve --allowed-host {name or 'NAME'}.\n"
        )
        await PlainTextResponse(message, status_code=400)(scope, receive, send)
