"""The names a server answers for: a guard against DNS rebinding.

A page on another site can have its own name resolve to 127.0.0.1 and then read and post to a genui served there as
if it were that site: the browser sends the attacker's name as the Host, and the Origin matches it, so the same-origin
check (genui.inputs.same_origin) passes. A request whose Host names no name the server answers for is refused
before it reaches a site: a 400 saying which names it answers for and how to add one, and a WebSocket closed before
it opens. ``genui serve`` bound to a loopback address answers for ``localhost``, ``127.0.0.1`` and ``::1``, and the
names ``--allowed-host`` adds (a reverse proxy's public name); bound to any other address, for every name unless
``--allowed-host`` names them. A Host that is an IP address is always answered: no page on another site can send
one but the address its own page came from (a workshop's laptop named by its name and reached by its LAN address
too refused everyone who typed the address).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Collection
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

ANY = "*"  # --allowed-host '*': every name
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::")  # addresses a server binds to listen on every address of the machine
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
    own = [_address(bound)] if bound and _address(bound) not in WILDCARDS else []
    return frozenset(host_name(name) for name in [*named, *LOOPBACK_NAMES, *own])


def network_address(ipv6: bool = False) -> str | None:
    """This machine's address on its network, as the route out of it picks (no packet is sent); None where it has
    no route out."""
    family, probe = (socket.AF_INET6, "2001:db8::1") if ipv6 else (socket.AF_INET, "192.0.2.1")  # documentation ones
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as udp:
            udp.connect((probe, 9))
            address = ipaddress.ip_address(udp.getsockname()[0])
    except (OSError, ValueError):
        return None
    return None if address.is_loopback or address.is_unspecified else str(address)


def allowed_name(text: str) -> str:
    """An ``--allowed-host`` value: a host name or an address as a Host header names it, port aside; ValueError,
    naming the fix, for a URL, a port, a wildcard or a network (each was taken, and then refused every request)."""
    name = text.strip()
    if name == ANY:
        return name
    if "://" in name:
        raise ValueError(f"{text!r} is a URL: give its host name alone ({urlsplit(name).hostname or 'NAME'})")
    if "*" in name:
        raise ValueError(f"{text!r} has a wildcard: name each host (repeat --allowed-host), or '*' for every one")
    if "/" in name:
        raise ValueError(f"{text!r} is not a host name: name each host; an address is answered without naming it")
    if name.startswith("[") or name.count(":") == 1:
        bare = host_name(name)
        if bare != _address(name.strip("[]")):
            raise ValueError(f"{text!r} has a port: give the name alone ({bare}), which any port is answered for")
    if not name or any(character.isspace() for character in name):
        raise ValueError(f"{text!r} is not a host name")
    return _address(name.strip("[]").rstrip("."))


def is_address(name: str) -> bool:
    """Whether a Host header's name (``host_name``) is an IP address, not a name."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


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
    return _address(host.rstrip(".")) if host else host  # mylaptop.local. is mylaptop.local


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
        # no Host (HTTP/1.0, a proxy's health check): no browser's request; an address: no page elsewhere sends it
        if name in self.hosts or not asked or is_address(name):
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
