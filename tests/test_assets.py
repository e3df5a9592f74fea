"""A site's own files (genui.assets): served from its assets folder, the only images its pages show, and copied
into its export."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from chromium import browser_page, collect_problems, served
from fakes import ClientFactory, FakeEngine, visit
from starlette.testclient import TestClient

from genui.app import create_app
from genui.cli import main
from genui.runtime import SiteRuntime
from genui.sites import Site, SiteConfigError, load_site

MODEL = "owner/model-x"
LOGO = '<img src="/_genui/assets/shop/logo.png" alt="Shop logo">'


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG image (grey pixels), as a browser decodes it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def shop_site(root: Path, opening_image: str = '{{ asset("logo.png") }}') -> Site:
    """genui new's site "shop", with an assets folder and its articles' opening showing the logo."""
    assert main(["new", "shop", "--dir", str(root), "--description", "A shop of old maps"]) == 0
    assets = root / "shop" / "assets"
    (assets / "fonts").mkdir(parents=True)
    (assets / "logo.png").write_bytes(png())
    (assets / "fonts" / "maps.woff2").write_bytes(b"wOF2 not really")
    (assets / ".env").write_text("SECRET=1\n", encoding="utf-8")
    opening = root / "shop" / "prompts" / "article_opening.j2"
    text = opening.read_text(encoding="utf-8")
    opening.write_text(text.replace("</h1>", f'</h1>\n<p><img src="{opening_image}" alt="Shop logo"></p>'), "utf-8")
    return load_site(root / "shop")


def images_writer(prompt: str, seed: int) -> str:
    """An article whose model wrote images: the site's logo, a page of the site, a file not there, a font."""
    return (  # the fake engine writes 320 characters at most, the opening's among them
        "<p><img src='/_genui/assets/shop/logo.png' alt='again'><img src='/Old_maps' alt='page'>"
        " <img src='/_genui/assets/shop/no.png' alt='none'> <img src='/_genui/assets/shop/fonts/maps.woff2' alt='font'>"
        "</p>"
    )


def test_a_sites_assets_are_served_as_they_are_and_nothing_outside_them(
    client_factory: ClientFactory, tmp_path: Path
) -> None:
    client = client_factory([shop_site(tmp_path)], FakeEngine())
    logo = client.get("/_genui/assets/shop/logo.png")
    assert logo.status_code == 200 and logo.content == png() and logo.headers["content-type"] == "image/png"
    assert logo.headers["cache-control"] == "no-cache" and "content-security-policy" in logo.headers
    again = client.get("/_genui/assets/shop/logo.png", headers={"if-none-match": logo.headers["etag"]})
    assert again.status_code == 304  # a browser revalidates on each page, and keeps its copy while unchanged
    assert client.get("/_genui/assets/shop/fonts/maps.woff2").status_code == 200
    for path in (
        "/_genui/assets/shop/.env",  # hidden: no .git, no .env
        "/_genui/assets/shop/fonts/%2e%2e/.env",  # (httpx would resolve a plain ../ before sending it)
        "/_genui/assets/shop/..%2fsite.toml",  # the site's own files are not its assets
        "/_genui/assets/shop/%2e%2e/site.toml",
        "/_genui/assets/shop/missing.png",
        "/_genui/assets/shop/fonts",
        "/_genui/assets/shop/",
        "/_genui/assets/nosuchsite/logo.png",
    ):
        answer = client.get(path)
        assert answer.status_code == 404 and "SECRET" not in answer.text and "[[routes]]" not in answer.text, path
    refused = client.post("/_genui/assets/shop/logo.png")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


def test_a_link_out_of_the_assets_folder_is_not_followed(client_factory: ClientFactory, tmp_path: Path) -> None:
    site = shop_site(tmp_path)
    (site.assets_dir() / "config.png").symlink_to(site.root / "site.toml")
    client = client_factory([site], FakeEngine())
    assert client.get("/_genui/assets/shop/config.png").status_code == 404


def test_a_page_shows_the_images_of_its_sites_assets_and_any_other_as_its_alt_text(
    client_factory: ClientFactory, tmp_path: Path
) -> None:
    client = client_factory([shop_site(tmp_path)], FakeEngine(images_writer))
    page = visit(client, "/Old_maps").text
    assert page.count(LOGO) == 1  # the opening's
    assert '<img src="/_genui/assets/shop/logo.png" alt="again">' in page  # the model's, of the site's logo
    assert 'alt="again">page none font</p>' in page and page.count("<img") == 2  # the rest as their text


@pytest.mark.parametrize("name", ["logo.jpg", "sample.png"])  # a literal name, though it holds the trial's value
def test_an_opening_showing_an_image_the_site_does_not_have_is_a_config_error(tmp_path: Path, name: str) -> None:
    site = shop_site(tmp_path, opening_image=f'{{{{ asset("{name}") }}}}')
    with pytest.raises(SiteConfigError) as refused:
        SiteRuntime.build(site, "")
    said = str(refused.value)
    assert "routes[2].opening" in said and f"/_genui/assets/shop/{name}" in said and 'asset("NAME.png")' in said


def test_an_opening_image_named_by_the_page_is_the_pages_own(client_factory: ClientFactory, tmp_path: Path) -> None:
    """A cover named by the page's title: one there is shown, one missing is its alt text, and neither is an error."""
    site = shop_site(tmp_path, opening_image='{{ asset("covers/" ~ params.title ~ ".png") }}')
    (site.assets_dir() / "covers").mkdir()
    (site.assets_dir() / "covers" / "Old_maps.png").write_bytes(png())
    client = client_factory([site], FakeEngine())
    assert '<img src="/_genui/assets/shop/covers/Old_maps.png" alt="Shop logo">' in visit(client, "/Old_maps").text
    assert "<p>Shop logo</p>" in visit(client, "/Sea_charts").text


@pytest.mark.browser
def test_an_export_copies_the_assets_and_its_pages_show_them_from_their_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = shop_site(tmp_path / "sites")
    outside = tmp_path / "outside"
    (outside / "keys").mkdir(parents=True)
    (outside / "secret.png").write_bytes(png())
    (outside / "keys" / "id_rsa").write_text("KEY\n", encoding="utf-8")
    (site.assets_dir() / "linked.png").symlink_to(outside / "secret.png")  # refused by the server: not copied
    (site.assets_dir() / "keys").symlink_to(outside / "keys")
    db = tmp_path / "genui.sqlite3"
    with TestClient(create_app([site], FakeEngine(model_id=MODEL), db_path=db)) as client:
        assert visit(client, "/Old_maps").status_code == 200
    out = tmp_path / "out"
    argv = ["cache", "export", "shop", str(out), "--db", str(db), "--sites-dir", str(tmp_path / "sites")]
    assert main([*argv, "--model", MODEL]) == 0
    capsys.readouterr()
    assert (out / "_genui" / "assets" / "shop" / "logo.png").read_bytes() == png()
    assert (out / "_genui" / "assets" / "shop" / "fonts" / "maps.woff2").is_file()
    copied = sorted(
        path.relative_to(out / "_genui" / "assets" / "shop").as_posix()
        for path in (out / "_genui" / "assets" / "shop").rglob("*")
        if path.is_file()
    )
    assert copied == ["fonts/maps.woff2", "logo.png"]  # no hidden file, nothing a link leads to out of the folder
    page = (out / "Old_maps" / "index.html").read_text(encoding="utf-8")
    assert '<img src="../_genui/assets/shop/logo.png" alt="Shop logo">' in page
    with browser_page() as browser:
        problems = collect_problems(browser)
        browser.goto((out / "Old_maps" / "index.html").as_uri())
        assert browser.evaluate("document.querySelector('article img').naturalWidth") == 2  # drawn, from its file
    assert problems == []
    assert "font-src 'self'" in page  # a stylesheet's font of the assets folder is allowed in the copy too


@pytest.mark.browser
def test_chromium_draws_a_pages_image_under_the_servers_policy(tmp_path: Path) -> None:
    app = create_app([shop_site(tmp_path)], FakeEngine(), db_path=tmp_path / "pages.sqlite3")
    with served(app) as url, browser_page() as page:
        problems = collect_problems(page)
        page.goto(url + "/Old_maps")
        page.wait_for_selector("#genui-content:not(.genui-live) article img", timeout=15_000)
        page.wait_for_function("document.querySelector('article img').complete", timeout=5_000)
        assert page.evaluate("document.querySelector('article img').naturalWidth") == 2  # drawn: the CSP allows it
        assert problems == []


def test_genuis_scripts_are_sent_compressed_to_a_browser_that_takes_it(
    client_factory: ClientFactory, wiki: Site
) -> None:
    """119 KB as they are: 9 s of a first visit on a slow phone link (a reader on a flaky network's review)."""
    client = client_factory([wiki])
    whole = client.get("/_genui/static/htmx.min.js", headers={"Accept-Encoding": "identity"})
    packed = client.get("/_genui/static/htmx.min.js", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in whole.headers and packed.headers["content-encoding"] == "gzip"
    assert packed.content == whole.content  # (httpx unpacks it) and sent in far fewer bytes:
    assert int(packed.headers["content-length"]) < len(whole.content) / 2
    assert packed.headers["cache-control"] == "no-cache" and "accept-encoding" in packed.headers["vary"].lower()
    unchanged = client.get(
        "/_genui/static/htmx.min.js", headers={"Accept-Encoding": "gzip", "If-None-Match": packed.headers["etag"]}
    )
    assert unchanged.status_code == 304 and not unchanged.content
    # each copy its own ETag: the same strong one told a cache the two bodies were byte for byte the same (a note)
    assert packed.headers["etag"] == "W/" + whole.headers["etag"] and not whole.headers["etag"].startswith("W/")
    for etag in (whole.headers["etag"], packed.headers["etag"]):  # either still answers a browser's ask with a 304
        again = client.get("/_genui/static/htmx.min.js", headers={"Accept-Encoding": "identity", "If-None-Match": etag})
        assert again.status_code == 304 and again.headers["etag"] == etag  # its own copy's (a cache takes it: a review)
