"""The names a server answers for (genui/hosts.py): a page on another site whose name it has made resolve to
127.0.0.1 (DNS rebinding) read genui's pages, posted replies and wrote new versions there, its Origin matching its
Host (a security review)."""

from __future__ import annotations

import socket

import pytest
from fakes import SITES_DIR, ClientFactory, FakeEngine, visit
from starlette.websockets import WebSocketDisconnect

from genui.cli import main
from genui.hosts import LOOPBACK_NAMES, allowed_hosts, host_name
from genui.screens import WS_PATH
from genui.sites import load_site
from genui.store import Store


def test_a_loopback_server_answers_for_its_own_names_and_those_named_and_another_for_any() -> None:
    loopback = {"localhost", "127.0.0.1", "::1"}
    assert allowed_hosts("127.0.0.1", []) == loopback
    assert allowed_hosts("::1", ["Genui.Example"]) == {*loopback, "genui.example"}
    assert allowed_hosts("localhost", ["*"]) is None
    assert allowed_hosts("0.0.0.0", []) is None  # a public server's names are its operator's to say
    # a container's health check (curl localhost) still answered: no other site's page can send a loopback name
    assert allowed_hosts("0.0.0.0", ["genui.example"]) == {*loopback, "genui.example"}
    assert allowed_hosts("192.168.1.5", ["genui.example"]) == {*loopback, "genui.example", "192.168.1.5"}
    assert allowed_hosts("127.0.0.2", []) == {*loopback, "127.0.0.2"}  # its own address (a review)
    assert allowed_hosts("0:0:0:0:0:0:0:1", []) == loopback
    for header, name in (
        ("localhost:8000", "localhost"),
        ("[::1]:8000", "::1"),
        ("[0:0:0:0:0:0:0:1]:8000", "::1"),
        ("EXAMPLE.org", "example.org"),
    ):
        assert host_name(header) == name


def test_a_request_for_another_name_is_refused_before_it_reads_posts_or_streams(
    client_factory: ClientFactory, tmp_path: object
) -> None:
    forum = load_site(SITES_DIR / "forum")
    options = {"hosts": LOOPBACK_NAMES}
    rebound = client_factory([forum], app_options=options, base_url="http://attacker.example:8151")
    page = rebound.get("/r/linux")
    assert page.status_code == 400 and page.headers["content-type"].startswith("text/plain")
    assert "does not answer for the host 'attacker.example:8151'" in page.text
    assert "genui serve --allowed-host attacker.example" in page.text
    assert page.headers["x-frame-options"] == "DENY"  # genui's headers on its refusals too
    origin = {"origin": "http://attacker.example:8151"}
    posted = rebound.post("/r/linux/Hello", data={"user": "eve", "text": "hi"}, headers=origin)
    assert posted.status_code == 400
    with (
        pytest.raises(WebSocketDisconnect) as closed,
        rebound.websocket_connect(f"ws://attacker.example:8151{WS_PATH}?url=/", headers=origin),
    ):
        pass
    assert closed.value.code == 1008
    for own in ("http://127.0.0.1:8151", "http://localhost:8000", "http://[::1]:8000"):
        client = client_factory([forum], FakeEngine(), app_options=options, base_url=own)
        assert visit(client, "/r/linux").status_code == 200, own
        posted = client.post("/r/linux/Hello", data={"user": "ada", "text": "hi"}, follow_redirects=False)
        assert posted.status_code == 303, own
    for db in tmp_path.glob("db*.sqlite3"):  # type: ignore[attr-defined]
        store = Store(db)
        assert [placed.post.user for placed in store.recent_posts()] in ([], ["ada"])
        store.close()


def test_a_host_that_is_an_address_is_answered_whatever_names_are_allowed(client_factory: ClientFactory) -> None:
    """A workshop's laptop served with --allowed-host mylaptop.local refused every participant who typed its LAN
    address (a workshop host's review). An address is no name a rebinding page can send: its origin would be it."""
    wiki = load_site(SITES_DIR / "wiki")
    options = {"hosts": allowed_hosts("0.0.0.0", ["mylaptop.local"])}
    for base in ("http://192.168.1.23:8000", "http://[fd00::23]:8000", "http://mylaptop.local.:8000"):
        client = client_factory([wiki], FakeEngine(), app_options=options, base_url=base)
        assert visit(client, "/Lisp").status_code == 200, base
    refused = client_factory([wiki], app_options=options, base_url="http://192.168.1.23.attacker.example:8000")
    assert refused.get("/Lisp").status_code == 400


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("http://mylaptop.local:8000", "is a URL: give its host name alone (mylaptop.local)"),
        ("*.local", "has a wildcard: name each host"),
        ("192.168.1.0/24", "is not a host name: name each host; an address is answered without naming it"),
        ("mylaptop.local:8000", "has a port: give the name alone (mylaptop.local)"),
    ],
)
def test_an_allowed_host_that_is_no_name_is_refused_at_start_naming_the_fix(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, given: str, said: str
) -> None:
    """Each was taken, and then every request was a 400 (a workshop host's review)."""
    import uvicorn

    async def serve(self: uvicorn.Server) -> None:  # a server that would start returns at once instead
        pass

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    argv = ["serve", "--site", "wiki", "--port", "0", "--db", ":memory:", "--allowed-host", given]
    with pytest.raises(SystemExit) as stopped:
        main(argv, load_engine=lambda *args: pytest.fail("no engine for an option refused"))
    assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_genui_serve_on_loopback_refuses_another_name_through_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    """As genui serve runs it (uvicorn, h11, websockets-sansio): a 400 for a page, and a WebSocket refused."""
    import uvicorn
    from chromium import served

    made: list[uvicorn.Config] = []

    async def serve(self: uvicorn.Server) -> None:
        made.append(self.config)

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    argv = ["serve", "--site", "wiki", "--port", "0", "--db", ":memory:"]
    assert main(argv, load_engine=lambda *args: FakeEngine()) == 0
    assert main([*argv, "--host", "0.0.0.0"], load_engine=lambda *args: FakeEngine()) == 0
    monkeypatch.undo()
    loopback, public = made
    for config, refused in ((loopback, True), (public, False)):
        with served(config.app, config=config) as url:  # type: ignore[arg-type]
            host, port = url.removeprefix("http://").split(":")
            asks = [
                (b"GET /_genui/health HTTP/1.1\r\nHost: %s\r\n" % name) for name in (b"evil.example", host.encode())
            ]
            answers = []
            for ask in asks:
                with socket.create_connection((host, int(port)), timeout=10) as client:
                    client.sendall(ask + b"Connection: close\r\n\r\n")
                    answers.append(client.recv(1024).split(b"\r\n")[0])
            assert answers[0].startswith(b"HTTP/1.1 400" if refused else b"HTTP/1.1 200"), answers
            assert answers[1].startswith(b"HTTP/1.1 200"), answers
            with socket.create_connection((host, int(port)), timeout=10) as client:  # HTTP/1.0 names no host
                client.sendall(b"GET /_genui/health HTTP/1.0\r\n\r\n")
                assert client.recv(1024).startswith(b"HTTP/1.1 200")
            with socket.create_connection((host, int(port)), timeout=10) as client:
                client.sendall(
                    b"GET " + WS_PATH.encode() + b"?url=/ HTTP/1.1\r\nHost: evil.example\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    b"Sec-WebSocket-Version: 13\r\n\r\n"
                )
                opened = client.recv(1024).split(b"\r\n")[0]
            assert opened.startswith(b"HTTP/1.1 403" if refused else b"HTTP/1.1 101"), opened
