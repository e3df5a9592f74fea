"""What genui reads from a request: its origin, the version asked for, the page it came from, a small form, and
the page version that genui's own URLs (the stream, the wait for a finished page) name in their query.

Malformed input raises ``BadRequest`` (a 400) or Starlette's ``HTTPException``; the app's exception handlers
(genui/errors.py) answer both.
"""

from __future__ import annotations

import ipaddress
import logging
from urllib.parse import parse_qs, unquote, unquote_to_bytes, urlsplit

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, HTTPConnection, Request

from genui.logs import OncePerWhile
from genui.pages import Job, Pages
from genui.routing import MAX_QUERY_VALUE, VERSION_KEY, BadRequest, is_number, url_path, version
from genui.runtime import SiteRuntime
from genui.screens import VARIATIONS_PATH
from genui.sites import MAX_PATH
from genui.store import MAX_POST, MAX_USER
from genui.words import WORDS

# A reply is at most MAX_POST characters, and its name MAX_USER, as a textarea's maxlength counts them (UTF-16 units,
# a line break one): sent url-encoded, one such unit takes at most 9 bytes (`東` is `%E6%9D%B1`; an emoji's two, 12).
# Anything bigger is not a reply.
MAX_FORM_BYTES = 9 * (MAX_POST + MAX_USER) + 1024
# The longest address a page may have: its path (percent signs, `?` and `#` written as three characters each) and a
# few query values, each of whose characters percent-encodes to as many as twelve (four UTF-8 bytes).
MAX_URL = 3 * MAX_PATH + 4 * 12 * MAX_QUERY_VALUE
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


log = logging.getLogger("genui")
FOREIGN_FORM = "That form belongs to another site."
# where a form's Origin and the Host name one host, on two ports: a reverse proxy that dropped the port (nginx's $host)
PROXY_DROPPED_PORT = (
    "That form was sent from {origin}, and this server was asked for {host}: behind a reverse proxy, pass the Host "
    "header on with its port (nginx: proxy_set_header Host $http_host; docs/security.md)."
)
PROXY_LOG = "a form or a page's stream from %r was refused: the server was asked for %r (a proxy that drops the port?)"
PROXY_SAID = OncePerWhile(PROXY_LOG, 60.0)
log.addFilter(PROXY_SAID)


def same_origin(connection: HTTPConnection) -> bool:
    """False for a browser request made by another site's page (browsers send Origin with every POST and WebSocket;
    one that sends none but says where the request comes from, Sec-Fetch-Site, is believed: a security review's
    second signal). A request that says neither (curl, a script) is no other site's page's."""
    origin = connection.headers.get("origin")
    if origin is None:
        return connection.headers.get("sec-fetch-site") not in ("cross-site", "same-site")
    try:
        return urlsplit(origin).netloc == connection.headers.get("host")
    except ValueError:  # not a URL at all ("http://["): no page of this site sent it
        return False


def foreign_form(connection: HTTPConnection) -> str:
    """Why a form or a page's stream ``same_origin`` refuses is refused: another site's, or where its Origin and the
    Host name one host with two ports, a reverse proxy that passed the Host on without its port (a teacher's review:
    every reply behind such a proxy was refused as "another site's", its text lost), said with the fix, and logged
    for the operator (once a minute: behind such a proxy every hover and every page sends one)."""
    origin = connection.headers.get("origin") or ""
    host = connection.headers.get("host") or ""
    try:
        sent, asked = urlsplit(origin), urlsplit(f"//{host}")
        same_host = sent.hostname is not None and sent.hostname == asked.hostname and sent.port != asked.port
    except ValueError:
        return FOREIGN_FORM
    if not same_host:
        return FOREIGN_FORM
    log.warning(PROXY_LOG, origin, host)  # as reprs: a header's control characters are no log line of their own
    return PROXY_DROPPED_PORT.format(origin=origin, host=host)


def embedded_elsewhere(connection: HTTPConnection) -> bool:
    """Whether another site's page asks for this URL as a part of itself (an ``<img>``, an ``<iframe>``, a script's
    fetch), as the browser says it (Sec-Fetch-Site, -Mode and -Dest): such a request reads stored pages and starts no
    run, or any page on the web could have a visitor's genui write pages for it and spend the visitor's own runs
    (a security review). A visitor who follows another site's link (the whole tab navigates) is no such request, and
    a browser that sends no Sec-Fetch-Site is believed, as an Origin left out is."""
    if connection.headers.get("sec-fetch-site") not in ("cross-site", "same-site"):
        return False
    # a prefetch or prerender another site's page lists is sent as a navigation, and is none (a review)
    purpose = (connection.headers.get("sec-purpose") or connection.headers.get("purpose") or "").lower()
    navigates = connection.headers.get("sec-fetch-mode") == "navigate" and "prefetch" not in purpose
    return not (navigates and connection.headers.get("sec-fetch-dest", "document") == "document")


def site_named(pages: Pages, name: str | None) -> SiteRuntime:
    runtime = pages.sites.get(name or "")
    if runtime is None:
        if name and (error := pages.config_errors.get(name)) is not None:  # a new site that does not load (--reload)
            raise HTTPException(404, f"This site does not load yet: {error}")
        raise HTTPException(404, "This site does not exist.")
    return runtime


def parent_url(connection: HTTPConnection, runtime: SiteRuntime) -> str | None:
    """The site-relative URL of the page this request came from (htmx names it; a plain click has a Referer)."""
    raw = connection.headers.get("hx-current-url") or connection.headers.get("referer")
    if not raw:
        return None
    try:
        parts = urlsplit(raw)
    except ValueError:  # "http://[": not a URL, so no page of this site
        return None
    if parts.netloc and parts.netloc != connection.headers.get("host"):
        return None  # another server's page (a search engine's Referer is its bare origin: no page of this site's `/`)
    path = unquote(parts.path)
    pages: Pages = connection.app.state.pages
    if path == pages.base + VARIATIONS_PATH:  # a link inside a candidate: the page the candidates are of
        varied = pages.variations.get(parse_qs(parts.query).get("id", [""])[0])
        return varied.url if varied is not None and varied.key.site == runtime.site.name else None
    if runtime.mount:
        if path != runtime.mount and not path.startswith(runtime.mount + "/"):
            return None
        path = path[len(runtime.mount) :] or "/"
    # As a URL again: a thread titled `What is V.11?` is /r/debian/What_is_V.11%3F, not the page at its first `?`
    path = url_path(path)
    return f"{path}?{parts.query}" if parts.query else path


def served_at(pages: Pages, href: str) -> tuple[SiteRuntime, str] | None:
    """The site that serves a link's ``href`` (a path on this server, as a page shows it) and the href as a URL of
    that site; None for any other address (another server's, the list of sites). BadRequest when it is no URL."""
    try:
        parts = urlsplit(href)
    except ValueError as err:  # "/[": not a URL at all
        raise BadRequest("href is not a URL") from err
    if parts.scheme or parts.netloc or not parts.path.startswith("/"):
        return None
    for runtime in pages.sites.values():
        if not runtime.mount or parts.path.startswith(runtime.mount + "/"):
            site_url = parts.path[len(runtime.mount) :]
            return runtime, f"{site_url}?{parts.query}" if parts.query else site_url
    return None


def client_address(connection: HTTPConnection) -> str | None:
    """Who is asking, for the per-client limits: the client's address, or its IPv6 /64 (one host's, which may
    take any address in it: five addresses of one /64 had five clients' shares, a security review). Behind a
    reverse proxy that uvicorn trusts (FORWARDED_ALLOW_IPS; 127.0.0.1 unless set), the address its X-Forwarded-For
    names. A client on the server's own link (a link-local address, or one in the /64 of the address it reached
    the server at) is its address: every device on a LAN has an address in one /64, and a workshop's twenty
    laptops shared one client's share (a workshop host's review)."""
    if connection.client is None:
        return None
    host = connection.client.host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # not an address (a test client's "testclient", a Unix socket's path)
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        block = ipaddress.ip_network(f"{address}/64", strict=False)
        own = _own_address(connection)
        if address.is_link_local or (own is not None and own.version == 6 and own in block):
            return str(address)
        return str(block)
    return str(getattr(address, "ipv4_mapped", None) or address)


def _own_address(connection: HTTPConnection) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address the client reached the server at (the ASGI scope's ``server``), None where it says none."""
    server = connection.scope.get("server")
    try:
        return ipaddress.ip_address(server[0]) if server else None
    except (ValueError, TypeError, IndexError):  # a Unix socket's path
        return None


def page_at(pages: Pages, runtime: SiteRuntime, connection: HTTPConnection) -> tuple[Job, int | None]:
    """The page and version named by ``?site=..&url=..[&v=..][&from=..]`` (the stream's and the wait's query)."""
    params = connection.query_params
    location = runtime.locate(params.get("url", "/"))
    if location is None:
        raise HTTPException(404, WORDS["no_page"])
    job = pages.job(runtime, location, params.get("from"), client_address(connection))
    return job, version(params.get(VERSION_KEY))


def form_text(form: FormData, name: str, most: int = 512) -> str:
    """A text field of a form, whitespace collapsed ("" when absent); BadRequest when it is a file or too long."""
    raw = form.get(name, "")
    if not isinstance(raw, str):
        raise BadRequest(f"{name} is text, not a file")
    text = " ".join(raw.split())
    if len(text) > most:
        raise BadRequest(f"{name} is longer than {most} characters")
    return text


def form_url(form: FormData, name: str = "url") -> str:
    """A page's address as a form of genui's own carries it (``Location.url``), byte for byte: not collapsed as a text
    field is, since `/files/My  Documents` (two spaces) and `/files/My Documents` are two pages. BadRequest when it
    is a file or longer than any page's address can be (the path and query limits apply once it is located)."""
    raw = form.get(name, "")
    if not isinstance(raw, str):
        raise BadRequest(f"{name} is text, not a file")
    if len(raw) > MAX_URL:
        raise BadRequest(f"{name} is longer than {MAX_URL} characters")
    return raw


def form_number(form: FormData, name: str, most: int = 10_000) -> int:
    """A positive number field of a form (1 to ``most``); BadRequest when absent or anything else."""
    raw = form_text(form, name)
    if not is_number(raw, 7) or not 1 <= int(raw) <= most:
        raise BadRequest(f"{name} takes a number from 1 to {most}")
    return int(raw)


async def small_form(request: Request) -> FormData:
    length = request.headers.get("content-length", "")
    if not is_number(length, 20):
        raise HTTPException(411, "A form needs a Content-Length.")
    if int(length) > MAX_FORM_BYTES:
        raise HTTPException(413, "That form is too large.")
    media_type = request.headers.get("content-type", "").partition(";")[0].strip(" \t").lower()
    # Starlette reads any other body (JSON, a `text/plain` form) as an empty form, which would be answered as a form
    # without its fields: a 404 for want of a site, a 400 for want of a text.
    if media_type not in FORM_TYPES and int(length):
        raise HTTPException(415, f"Send the form as {' or '.join(FORM_TYPES)}, as a page's own forms do.")
    # A url-encoded form's escapes are read as UTF-8 with each broken sequence made U+FFFD: a reply would be stored
    # with its bytes lost. Browsers send UTF-8; anything else is refused. (Read first: the form reads the body then.)
    try:
        if media_type == "application/x-www-form-urlencoded":
            try:
                for field in (await request.body()).split(b"&"):
                    unquote_to_bytes(field.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest("the form is not UTF-8 text: send it as UTF-8") from None
        # No form of genui's takes a file; an uploaded one would be a temporary file nobody closes (a 400 instead).
        form = await request.form(max_files=0)
    except ClientDisconnect:  # its body cut off (a phone losing its signal mid-post): a 500 with a traceback was
        # logged for each, and counted as a server error (an adversarial client's review); nothing is stored
        raise BadRequest("the form ended before the whole of it came: the connection closed as it was sent") from None
    # A multipart part may name its own charset (`utf-7`), whose decoding can leave lone surrogates that no page,
    # database or response can hold.
    if not all(_is_text(key) and (not isinstance(value, str) or _is_text(value)) for key, value in form.multi_items()):
        raise BadRequest("the form is not text: send it as UTF-8")
    return form


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
