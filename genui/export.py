"""A site's cached pages as a folder of static HTML (``genui cache export SITE DIR``): a demo that any static host, or
a browser opening the files, shows with no server and no model.

Each page the page cache holds for the site as it is configured now, on the model named, is fetched from the app
itself (in process, as a browser's plain GET would have it, while the app's model "loads" and so writes nothing),
at its newest version. Then what needs genui's server goes: scripts, forms (the toolbar, the site bar's queries, a
thread's reply form), htmx's attributes. A link to another exported page becomes a relative link to its file, so the
folder works from ``file://`` as well as from a web server's root or a subfolder; a link to a page not in the cache
leads to the copy's list of its pages instead, titled "not in this copy" (its address after the list's ``#``, so that a
site's styles of links by their address still match). The pages' HTML passed
the sanitiser when it was written; a Content-Security-Policy in each file allows no script at all.

Files: ``/`` is ``index.html``, ``/r/lisp/Macros`` is ``r/lisp/Macros/index.html``, and a page with a query keeps
it in a folder of its own: ``/search?q=lisp`` is ``search/~%3Fq=lisp/index.html``. Names are percent-encoded but for
what every common file system takes (``_disk_name``); a name too long for one (over 200 bytes) is cut, with a hash
of the whole; pages whose names differ only in letter case, one name on macOS and Windows, each have a file of their
own (``_distinct``). A page whose file's path would be longer than 1,024 bytes (29 segments of 16 emoji: 1.9 KB) is
``~long/<hash>/index.html``, and a page's first folder named ``_genui``, where genui's own files go, is
``~_genui``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import html
import os
import posixpath
import re
import shutil
import threading
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from markupsafe import Markup

from genui.app import create_app
from genui.assets import ASSETS_PATH, asset_file, asset_url
from genui.cache import counted
from genui.resources import bundled
from genui.routing import BadRequest, Location
from genui.runtime import SiteRuntime
from genui.screens import words_of
from genui.sites import Site
from genui.store import Store
from genui.words import WORDS

STATIC = ("genui.css", "favicon.svg")  # what an exported page reads of genui's static files
PAGES = "_genui/pages.html"  # the copy's list of its pages (under _genui, where no page's file is)
OWN = "_genui/files.txt"  # the names the copy wrote at its top: what --replace may delete (a publisher's CNAME stays)
NOT_EXPORTED = WORDS["not_in_copy"]  # the title of a link to a page that was not exported, in English
ANSWER_S = 30.0  # the longest a cached page may take the app to answer
LONGEST_NAME = 200  # bytes of a file or folder name; most file systems take 255
# bytes of a file's path inside the export; the export's own folder comes on top (Linux takes 4,096 bytes for a whole
# path, macOS 1,024: there a copy's folder with a long path can still pass it)
LONGEST_PATH = 1024
REFERRER = "same-origin"  # as genui.security's Referrer-Policy: a link off the site sends no address of the copy
# frame-ancestors would be ignored in a <meta>, and said so in the console
CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'none'"
_DROPPED = {"script", "noscript", "form"}  # what needs genui's server, or a script
_DROPPED_IDS = {"genui-toolbar", "genui-indicator", "genui-announce"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_SAFE = "!$&'()*+,;=@-._~"  # what a link's segment holds as it is (RFC 3986 pchar, less `%` and `:`, a scheme's end)
_DISK_SAFE = "!$&'()+,;=@-._~"  # what a file's name holds as it is (and letters and digits)
# the names Windows keeps for devices, with any extension ("Naming Files, Paths, and Namespaces"): the superscript
# digits too, which a name now keeps as they are (COM¹)
_DEVICES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{port}{n}" for port in ("COM", "LPT") for n in [*"123456789", "¹", "²", "³"]}
)


class ExportError(ValueError):
    """The export cannot be written (a folder that is not empty, a page the app would not serve)."""


@dataclass
class Exported:
    """What ``export`` wrote: the pages (site-relative URLs) and those it passed by, with why."""

    files: dict[str, str] = field(default_factory=dict)  # each page's file, relative to the export's folder
    skipped: list[tuple[str, str]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # what else the cache holds of the site, said (_left_out)

    @property
    def pages(self) -> list[str]:
        """The pages written, the front page first where it is one."""
        return list(self.files)


def file_of(location: Location) -> str:
    """The file an exported page is written to, relative to the export's folder (``/`` is ``index.html``): each
    segment of its path a folder, named with what no common file system refuses (``_disk_name``), then its query."""
    names = [_disk_name(segment) for segment in location.path.split("/") if segment]
    if names and names[0].lower() == "_genui":  # genui's own files' folder (a catch-all route's page could be one)
        names[0] = "~" + names[0]
    if location.query:  # after "~", which no segment's name starts with but an escaped one
        pairs = sorted(location.query.items())
        names.append(_short("~%3F" + "&".join(f"{_query_part(key)}={_query_part(value)}" for key, value in pairs)))
    written = "/".join([*names, "index.html"])
    if len(written.encode("utf-8")) > LONGEST_PATH:  # in a folder of its own, named by a hash of the whole
        return f"~long/{hashlib.sha256(written.encode('utf-8')).hexdigest()[:32]}/index.html"
    return written


def _disk_name(segment: str) -> str:
    """A path segment as a folder's name: percent-encoded but for what every common file system takes (Windows
    refuses `?`, `:`, `*`, `"`, `<`, `>`, `|`, and drops a name's last `.`; ``_on_disk``), so `What_is_V.11?` is
    `What_is_V.11%3F`, `Crème brûlée` is `Crème%20brûlée` and `etc.` is `etc%2E`; one that is `index.html`, or
    starts with `~`, gets a `~` before it (a page's folder could otherwise be another page's file), and so does one
    Windows keeps for a device (`NUL`, `com1.txt`)."""
    name = "".join(char if _on_disk(char) else quote(char, safe=_DISK_SAFE) for char in segment)
    if name.endswith("."):
        name = name[:-1] + "%2E"
    escaped = name == "index.html" or name.startswith("~") or name.partition(".")[0].upper() in _DEVICES
    return _short("~" + name if escaped else name)


def _query_part(text: str) -> str:
    """A query's key or value in a file's name: as a path segment's (``_on_disk``: `café` stays, where it was
    `caf%25C3%25A9`), its `&`, `=`, `+` and `%` encoded too, so that no two queries share a name."""
    part = "".join(char if _on_disk(char) and char not in "&=+%" else quote(char, safe="") for char in text)
    return part[:-1] + "%2E" if part.endswith(".") else part  # (the query's last value ends the name: Windows drops it)


def _on_disk(char: str) -> bool:
    """Whether a file's name holds ``char`` as it is: ASCII's letters, digits and _DISK_SAFE, and any other script's
    letters, marks, digits and signs (`Crème_brûlée`, `東京`: percent-encoded, a copy's address bar read
    `Cr%25C3%25A8me…`), but not spaces, controls or format characters (a right-to-left mark) of any script."""
    if char.isascii():
        return char.isalnum() or char in _DISK_SAFE
    return unicodedata.category(char)[0] not in "CZ"


def _distinct(files: dict[str, str]) -> dict[str, str]:
    """``files`` with each file whose path another's differs from only in letter case (`Lisp`, `LISP`: one file on
    macOS and Windows) moved into a folder of its own beside it, `LISP/~2/index.html` (no page's folder is `~2`)."""
    taken: set[str] = set()
    distinct: dict[str, str] = {}
    for url, own in files.items():
        chosen, number = own, 1
        while chosen.casefold() in taken:  # (`Éclair` and `éclair` too; folding more than a disk does costs a ~2)
            number += 1
            chosen = posixpath.join(posixpath.dirname(own), f"~{number}", "index.html")
        taken.add(chosen.casefold())
        distinct[url] = chosen
    return distinct


def _short(name: str) -> str:
    """A file name no file system refuses for its length: ``name``, or its start and a hash of the whole."""
    encoded = name.encode("utf-8")
    if len(encoded) <= LONGEST_NAME:
        return name
    start = encoded[: LONGEST_NAME - 17].decode("utf-8", errors="ignore")
    return f"{start}-{hashlib.sha256(encoded).hexdigest()[:16]}"


def link(from_file: str, to_file: str) -> str:
    """The relative URL from one exported file to another, each segment percent-encoded where it must be: up to the
    export's folder and down the other's whole path (``../terminal/index.html``, ``./terminal/index.html``), never
    the shortest way, so that a stylesheet picking links by where they lead (``a[href*="/terminal"]``, as the
    desktop's icons are drawn) finds them in the copy too."""
    up = from_file.count("/")
    relative = "../" * up + to_file if up else "./" + to_file
    return "/".join(quote(segment, safe=_SAFE) for segment in relative.split("/"))


def current_pages(store: Store, runtime: SiteRuntime, model: str) -> list[Location]:
    """Every page of the site the cache holds for its routes as they are now and ``model``, by its own URL."""
    found: dict[str, Location] = {}
    for route in runtime.site.routes:
        if route.cache != "forever":
            continue
        for written in store.written(runtime.site.name, model, runtime.prompts.version(route), limit=1_000_000):
            with contextlib.suppress(BadRequest):
                location = runtime.router.resolve(written.path, parse_qsl(written.query, keep_blank_values=True))
                if location is not None and not location.aliased and location.route is route:
                    found.setdefault(location.url, location)
    return sorted(found.values(), key=lambda location: (location.path != "/", location.url))


def export(
    site: Site,
    db: Path,
    model: str,
    out: Path,
    *,
    named: Path | None = None,
    only: set[str] | None = None,
    replace: bool = False,
) -> Exported:
    """Write the site's cached pages (``current_pages``) under ``out``, which must be missing or empty, or (``replace``)
    hold a copy this wrote before: the new copy is written beside it and takes its place once whole, so that a web
    server serving ``out`` never shows half of each, and a copy that fails leaves the earlier one as it was.
    ``named``: the page cache as the user named it, where ``db`` is a copy of it. ``only``: those of these
    site-relative URLs alone (ExportError for one the cache does not hold)."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file, not a folder: name a new folder")
    earlier = out.exists() and any(out.iterdir())
    if earlier and not replace:
        again = ", or pass --replace to write this copy again in its place" if _is_copy(out) else ""
        raise ExportError(f"{out} is not an empty folder: name a new one, or empty it first{again}")
    if earlier and not _is_copy(out):  # a folder of the user's own files is never deleted (--replace DIR in a typo)
        raise ExportError(
            f"{out} holds files but no copy genui wrote (it has no {PAGES}): --replace replaces only an earlier copy;"
            " name a new folder"
        )
    if earlier:
        _check_replaceable(out.resolve())
    runtime = SiteRuntime.build(site, "")
    store = Store(db)
    try:
        pages = current_pages(store, runtime, model)
        versions = {runtime.prompts.version(route) for route in site.routes}
        groups = [group for group in store.page_groups() if group.site == site.name]
        held = {  # each model's and route version's URLs, for what the copy leaves out
            (group.model, group.template): {
                (page.path, page.query) for page in store.written(site.name, group.model, group.template, limit=10**9)
            }
            for group in groups
        }
    finally:
        store.close()
    others = sorted({group.model for group in groups if group.template in versions} - {model})
    if not pages:
        fix = (
            f"it holds pages of {', '.join(others)}: name the model with --model"
            if others
            else f"write some first (genui serve, or genui cache warm {site.name})"
        )
        raise ExportError(f"{named or db} holds no page of {site.name} as it is configured now by {model}; {fix}")
    unnamed = 0
    if only is not None:
        missing = sorted(only - {location.url for location in pages})
        if missing:
            raise ExportError(
                f"{named or db} holds no page of {site.name} at {', '.join(missing)} as it is configured now by"
                f" {model} (genui cache pages lists those it holds)"
            )
        unnamed = len(pages) - len(only)
        pages = [location for location in pages if location.url in only]
    documents = asyncio.run(_fetched(site, db, model, [location.url for location in pages]))
    exported = Exported(left_out=_left_out(held, versions, model))
    if unnamed:
        exported.left_out.insert(0, f"{counted(unnamed, 'page')} not named with --page")
    for location in pages:  # a page the app did not serve is not in the copy: links to it lead nowhere
        status, _ = documents[location.url]
        if status != 200:
            exported.skipped.append((location.url, f"the app answered {status}" if status else "no answer"))
        else:
            exported.files[location.url] = file_of(location)
    exported.files = _distinct(exported.files)
    if earlier:  # beside it, then in its place: a reader of the served folder sees the one copy or the other
        out = out.resolve()
        fresh = out.with_name(f".{out.name}.genui-{os.getpid()}")
        try:
            _write(fresh, site, runtime, exported, documents, model)
            _like(out, fresh)
            moved: list[str] = []
            try:
                for name in _theirs(out, fresh):  # the publisher's own files beside the copy (.git, CNAME) go on
                    (out / name).rename(fresh / name)
                    moved.append(name)
                _swap(out, fresh)
            except BaseException:  # back where they were before the new copy is deleted
                for name in moved:
                    (fresh / name).rename(out / name)
                raise
        except ExportError as err:
            shutil.rmtree(fresh, ignore_errors=True)
            kept = "" if "as it was" in str(err) else f"; the earlier copy in {out} is as it was"
            raise ExportError(f"{err}{kept}") from None
        except BaseException:  # an interrupt: the earlier copy stays, and nothing of the new one
            shutil.rmtree(fresh, ignore_errors=True)
            raise
    else:
        _write(out, site, runtime, exported, documents, model)
    return exported


def _is_copy(folder: Path) -> bool:
    """Whether ``folder`` holds a copy ``export`` wrote: its list of pages."""
    return (folder / PAGES).is_file()


def _check_replaceable(out: Path) -> None:
    """ExportError where ``--replace`` cannot put a new copy in the place of the one in ``out``: one written before
    the copy listed its own files, a shell's folder inside it (renamed away, the shell would be left in a folder
    deleted), a parent folder the new copy cannot be written in beside it."""
    if not (out / OWN).is_file():
        raise ExportError(
            f"{out} holds a copy an earlier genui wrote, which does not list its own files ({OWN}), so --replace cannot"
            " tell them from files of yours beside them: empty the folder first, or name a new one"
        )
    here = Path.cwd().resolve()
    if here == out or out in here.parents:
        raise ExportError(f"this shell's folder is inside {out}, which --replace renames: cd out of it, then run again")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise ExportError(
            f"--replace writes the new copy beside {out}, in {out.parent}, which you cannot write: export into a new"
            " folder and move it, or make the parent writable"
        )


def _like(out: Path, fresh: Path) -> None:
    """Give the folder ``fresh`` the permissions and group of ``out``, the earlier copy's folder: a web server that
    reads it by its group (chgrp www-data) reads the new one too. The group as far as the user may set it."""
    shutil.copymode(out, fresh)
    with contextlib.suppress(OSError):
        os.chown(fresh, -1, out.stat().st_gid)


def _theirs(out: Path, fresh: Path) -> list[str]:
    """The names at the top of ``out`` that the earlier copy did not write (``OWN``): the publisher's own (.git,
    CNAME, .htaccess), which --replace keeps. ExportError for one the new copy writes a file of that name for."""
    written = set((out / OWN).read_text(encoding="utf-8").splitlines())
    theirs = sorted(name for name in os.listdir(out) if name not in written)
    if clash := [name for name in theirs if (fresh / name).exists() or (fresh / name).is_symlink()]:
        raise ExportError(
            f"{', '.join(str(out / name) for name in clash)} is no file of the earlier copy, and the new copy writes"
            " one of that name: move it away, or name a new folder"
        )
    return theirs


def _swap(out: Path, fresh: Path) -> None:
    """Put the folder ``fresh`` in the place of ``out`` (a folder), and delete ``out``'s files: two renames, one
    moment apart, and the earlier copy back in place if the second fails."""
    old = out.with_name(f".{out.name}.genui-old-{os.getpid()}")
    try:
        out.rename(old)
    except OSError as err:  # a mount point (EBUSY), a folder the user may not rename
        fix = "a mount point is not renamed: export into a folder inside it" if err.errno == errno.EBUSY else ""
        raise ExportError(f"cannot replace {out}: {err.strerror or err}; {fix or 'name a new folder'}") from None
    try:
        fresh.rename(out)
    except OSError as err:
        try:
            old.rename(out)
        except OSError:
            raise ExportError(
                f"cannot replace {out}: {err.strerror or err}, nor put the earlier copy back: it is in {old}"
            ) from None
        raise ExportError(f"cannot replace {out}: {err.strerror or err}; the earlier copy is as it was") from None
    shutil.rmtree(old, ignore_errors=True)


def _write(
    out: Path,
    site: Site,
    runtime: SiteRuntime,
    exported: Exported,
    documents: dict[str, tuple[int, bytes]],
    model: str,
) -> None:
    """Write the copy's files under ``out``: its pages, their list, genui's static files, the site's stylesheet and
    assets."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        for url, own in exported.files.items():
            target = out / own
            target.parent.mkdir(parents=True, exist_ok=True)
            page = _static(documents[url][1].decode("utf-8"), runtime, own, exported.files, model)
            target.write_text(page, "utf-8")
        titles = {url: _title_of(documents[url][1].decode("utf-8"), site.title) for url in exported.files}
        for own in [PAGES, *([] if "index.html" in exported.files.values() else ["index.html"])]:
            (out / own).parent.mkdir(parents=True, exist_ok=True)
            (out / own).write_text(_page_list(runtime, own, exported.files, titles, model), "utf-8")
        (out / "_genui" / "static").mkdir(parents=True, exist_ok=True)
        for name in STATIC:
            shutil.copyfile(bundled("static") / name, out / "_genui" / "static" / name)
        stylesheet = site.stylesheet_path()
        if stylesheet is not None and stylesheet.is_file():
            (out / "_genui" / "css").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stylesheet, out / "_genui" / "css" / f"{site.name}.css")
        _copy_assets(site, out / ASSETS_PATH.strip("/") / site.name)  # its stylesheet reads them as ../assets/NAME/…
        (out / OWN).write_text("".join(f"{name}\n" for name in sorted(os.listdir(out))), "utf-8")  # (out holds ours)
    except OSError as err:  # a folder in a file's place, one not writable, a full disk: said, not a traceback
        where = f" ({err.filename})" if err.filename and Path(err.filename) != out else ""
        raise ExportError(
            f"cannot write the copy in {out}: {err.strerror or err}{where}; name a folder you can write"
        ) from None


def _left_out(held: dict[tuple[str, str], set[tuple[str, str]]], versions: set[str], model: str) -> list[str]:
    """What the cache holds of the site that the copy leaves out, said: pages only another model wrote, pages only an
    earlier config wrote (a publisher took "exported 1 page" for the whole site, its 5 articles of an earlier prompt
    unsaid). ``held``: the URLs each (model, route version) wrote."""

    def urls(models: set[str] | None, current: bool) -> set[tuple[str, str]]:  # None: every model's
        return set().union(
            *(
                found
                for (by, version), found in held.items()
                if (models is None or by in models) and (version in versions) == current
            )
        )

    copied = urls({model}, True)
    said, counted_already = [], set(copied)
    for other in sorted({by for by, _ in held} - {model}):
        theirs = urls({other}, True) - counted_already
        counted_already |= theirs
        if theirs:
            said.append(f"{counted(len(theirs), 'page')} written by {other} (--model {other} exports those)")
    earlier = urls(None, False) - counted_already
    if earlier:
        said.append(
            f"{counted(len(earlier), 'page')} written from an earlier config of the site's routes (genui cache lists"
            " them; a server writes them again as they are asked for)"
        )
    return said


def _title_of(document: str, site_title: str) -> str:
    """A served page's title, less the site's (`Lisp — Genpedia` is `Lisp`)."""
    found = re.search(r"<title>(.*?)</title>", document, re.S)
    title = html.unescape(found[1]).strip() if found else ""
    return title.removesuffix(f" — {site_title}") or title


def _page_list(runtime: SiteRuntime, own: str, files: dict[str, str], titles: dict[str, str], model: str) -> str:
    """The copy's list of its pages (``PAGES``, and ``index.html`` where the front page is not in the copy): a page
    reached only through a form (a search, a terminal's command) has no link to it in the copy but this one."""
    site, words = runtime.site, words_of(runtime)
    heading = words.say("copy_pages")  # marked English on a site in another language that does not say it
    direction = Markup(' dir="rtl"') if site.direction == "rtl" else ""
    stylesheet = (
        Markup('<link rel="stylesheet" href="{}">').format(link(own, f"_genui/css/{site.name}.css"))
        if site.stylesheet
        else ""
    )
    items = Markup("\n").join(
        Markup('<li><a href="{}">{}</a> <code>{}</code></li>').format(link(own, file), titles[url], url)
        for url, file in files.items()
    )
    footer = words.say("copy_footer", model=Markup("<code>{}</code>").format(model))
    return Markup(
        '<!doctype html>\n<html lang="{lang}"{direction}>\n<head>\n<meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" content="{csp}">\n<meta name="referrer" content="{referrer}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{said} — {title}</title>\n'
        '<link rel="icon" href="{icon}" type="image/svg+xml">\n<link rel="stylesheet" href="{css}">\n{stylesheet}\n'
        '</head>\n<body class="genui site-{name}">\n<main id="genui-main" class="genui-main">\n<h1>{heading}</h1>\n'
        '<ul class="genui-copy-pages">\n{items}\n</ul>\n</main>\n<footer class="genui-footer">{footer}</footer>\n'
        "</body>\n</html>\n"
    ).format(
        lang=site.lang,
        direction=direction,
        csp=CSP,
        referrer=REFERRER,
        heading=heading,
        said=words.text("copy_pages"),  # a title holds no markup
        title=site.title,
        icon=link(own, "_genui/static/favicon.svg"),
        css=link(own, "_genui/static/genui.css"),
        stylesheet=stylesheet,
        name=site.name,
        items=items,
        footer=footer,
    )


def _copy_assets(site: Site, into: Path) -> None:
    """The files of the site's assets folder the server serves (genui.assets.asset_file): no hidden one, and none a
    link leads to out of the folder (the server refuses both; a copy is published)."""
    folder = site.assets_dir()
    for top, folders, names in os.walk(folder):  # links to folders are not followed
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in names:
            relative = (Path(top) / name).relative_to(folder).as_posix()
            found = asset_file(folder, site.name, asset_url(site.name, relative))
            if found is not None:
                (into / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(found, into / relative)


async def _fetched(site: Site, db: Path, model: str, urls: list[str]) -> dict[str, tuple[int, bytes]]:
    """Each URL as the app serves it to a plain GET, while its model "loads": cached pages only, nothing written."""
    never = threading.Event()

    def loading() -> Any:  # in a daemon thread the app does not wait for
        never.wait()
        raise RuntimeError("an export loads no model")

    app = create_app([site], db_path=db, load_engine=loading, identify_model=lambda: model, takes_up=False)
    async with _lifespan(app):
        app.state.pages.seen.noting = False  # a copy is no reader: prune --unseen goes by what readers were shown
        first = urls[0]
        for _ in range(200):  # until the app has named its model (at once: identify_model returns it)
            status, _ = await _get(app, first)
            if status != 503:
                break
            await asyncio.sleep(0.01)
        documents = {}
        for url in urls:
            try:
                documents[url] = await asyncio.wait_for(_get(app, url), ANSWER_S)
            except TimeoutError:
                documents[url] = (0, b"")
    never.set()
    return documents


@contextlib.asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    """The app started and stopped as a server would (its lifespan), for in-process requests."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        raise ExportError(f"the app did not start: {started.get('message', started['type'])}")
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task


async def _get(app: Any, url: str) -> tuple[int, bytes]:
    """A plain GET of a site-relative URL (as a browser's, not htmx's): its status and body."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": parts.path.encode("utf-8"),
        "query_string": parts.query.encode("utf-8"),
        "root_path": "",
        "headers": [(b"host", b"genui.export")],
        "client": ("127.0.0.1", 0),
        "server": ("genui.export", 80),
    }
    status, chunks = 0, []
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if asked:
            await asyncio.Event().wait()  # nothing more: the app may wait for a disconnect, which never comes
        asked = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


def _static(document: str, runtime: SiteRuntime, own: str, files: dict[str, str], model: str) -> str:
    """A served page's document as a static file: what needs the server gone, links to the files exported."""
    rewriter = _Rewriter(runtime, own, files, model)
    rewriter.feed(document)
    rewriter.close()
    return "".join(rewriter.out)


class _Rewriter(HTMLParser):
    """Copies a document genui served (its templates around sanitised HTML: every element closed) as it is, but for
    what ``_static`` changes. Text and character references pass through untouched."""

    def __init__(self, runtime: SiteRuntime, own: str, files: dict[str, str], model: str) -> None:
        super().__init__(convert_charrefs=False)
        self.runtime, self.own, self.files, self.model = runtime, own, files, model
        self.out: list[str] = []
        self.dropping = 0  # elements open inside one being left out (0: none is)
        self.in_footer = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=True)

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], closed: bool) -> None:
        void = closed or tag in _VOID
        named = dict(attrs)
        if self.dropping or tag in _DROPPED or named.get("id") in _DROPPED_IDS or _live(named):
            self.dropping += 0 if void else 1
            return
        if tag == "meta" and named.get("name") == "htmx-config":
            return
        if self.in_footer:
            return
        kept = [(name, value) for name, value in attrs if not name.startswith(("hx-", "ws-", "data-genui"))]
        if tag == "a":
            target = _target(named.get("href") or "", self.runtime, self.files)
            if target is None:
                # a page not in the copy: its link leads to the copy's list of pages, with its own address after the
                # #, so that a site's styles of links by their address still match (the desktop's icons,
                # a[href*="/terminal"], were plain folders where the link had no href: a publisher's review)
                missing = urlsplit(named.get("href") or "").path
                href = link(self.own, PAGES) + "#" + quote(missing, safe="/%")
                kept = [(name, value) for name, value in kept if name not in ("href", "title")]
                kept += [("href", href), ("title", words_of(self.runtime).text("not_in_copy"))]
            elif target:
                file, fragment = target
                href = link(self.own, file) + (f"#{fragment}" if fragment else "")
                kept = [(name, href if name == "href" else value) for name, value in kept]
        elif tag == "img" and (path := unquote(urlsplit(named.get("src") or "").path)).startswith(ASSETS_PATH):
            src = link(self.own, path.lstrip("/"))  # a file of the site's assets, copied (_copy_assets)
            kept = [(name, src if name == "src" else value) for name, value in kept]
        elif tag == "link" and (named.get("href") or "").startswith("/_genui/"):
            href = link(self.own, (named.get("href") or "").lstrip("/").partition("?")[0])
            kept = [(name, href if name == "href" else value) for name, value in kept]
        self.out.append(f"<{tag}{_attributes(kept)}>")
        if tag == "head":  # what the server's headers said, as far as a file can say it (a host adds the rest)
            self.out.append(f'\n<meta http-equiv="Content-Security-Policy" content="{CSP}">')
            self.out.append(f'\n<meta name="referrer" content="{REFERRER}">')
        elif tag == "footer" and "genui-footer" in (named.get("class") or "").split():
            self.in_footer = True
            model = Markup("<code>{}</code>").format(self.model)
            words = words_of(self.runtime)
            listed = Markup(' <a href="{}">{}</a>').format(link(self.own, PAGES), words.say("copy_pages"))
            self.out.append(str(words.say("copy_footer", model=model) + listed))

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            self.dropping -= 0 if tag in _VOID else 1
            return
        if self.in_footer:
            if tag == "footer":  # genui's footer holds none of its own
                self.in_footer = False
                self.out.append("</footer>")
            return
        self.out.append(f"</{tag}>")

    def _text(self, text: str) -> None:
        if not self.dropping and not self.in_footer:
            self.out.append(text)

    def handle_data(self, data: str) -> None:
        self._text(data)

    def handle_entityref(self, name: str) -> None:
        self._text(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self._text(f"&#{name};")

    def handle_comment(self, data: str) -> None:
        pass  # genui's templates' comments are Jinja's, never sent; a comment here is nobody's

    def handle_decl(self, decl: str) -> None:
        self._text(f"<!{decl}>")


def _live(attrs: dict[str, str | None]) -> bool:
    """An element only a live server's page has: one that asks the server again by itself (a thread's "genui is
    loading its model"), or the note that an edited config did not load."""
    return "data-genui-retry" in attrs or "genui-config-error" in (attrs.get("class") or "").split()


def _attributes(attrs: list[tuple[str, str | None]]) -> str:
    return "".join(f" {name}" if value is None else f' {name}="{html.escape(value)}"' for name, value in attrs)


def _target(href: str, runtime: SiteRuntime, files: dict[str, str]) -> tuple[str, str] | tuple[()] | None:
    """Where a link of a served page goes in the export: (file, fragment) for an exported page, () to leave it as it
    is (a place on the page, another site's address), None for a page of the site not exported."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path.startswith("/"):
        return ()
    url = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        location = runtime.locate(url)
    except BadRequest:
        return None
    if location is None or location.url not in files:
        return None
    return files[location.url], parts.fragment
