"""Reloading sites while serving (``genui serve --reload``): for a developer working on a site.

A site is its folder: ``site.toml``, the prompt templates and openings under ``prompts/``, the stylesheet. When a
file under a served site's folder changes, the site is loaded again and checked as at start-up, and the next request
is served with it; the model stays loaded and runs under way finish with the config they started on. Each page's
cache key holds a hash of its route's templates and the settings they are rendered with (genui.prompts), so a page
written with an edited prompt or setting is a new page, and the ones written before stay where they were.

A config that fails to load changes nothing: the site goes on being served with its last good config, the error
(file, key, fix: genui.sites.SiteConfigError) is logged, and every page of the site shows it until a change loads.

Given the folder the sites were found in (``new_in``: none named on the command line), a site made there while
serving (``genui new``, a copy) is served from then on at /{name}, once it loads; one that does not load is logged,
and tried again when its files change. Where one site is served alone (``alone``: at /), a new one is said to need a
restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import watchfiles

from genui.cache import counted
from genui.runtime import SiteRuntime
from genui.sites import ASSETS_DIR, SiteConfigError, load_site, site_folders
from genui.upgrade import take_up

if TYPE_CHECKING:
    from genui.pages import Pages

log = logging.getLogger("genui")

DEBOUNCE_MS = 200  # an editor's save is often several writes; changes this close together are one reload
FOLDERS_POLL_S = 1.0  # how often a site's folder is looked for, gone or made again
WATCH_READY_MS = 500  # the watcher answers, empty, after this long without a change (reload.SiteReloader._watch)


class SiteReloader:
    """Watches the served sites' folders and swaps a site's runtime in ``pages.sites`` when its files change."""

    def __init__(self, pages: Pages, new_in: Path | None = None, alone: bool = False) -> None:
        self.pages = pages
        self._alone = alone  # one site served at /: a new one is only said to need a restart
        self._roots = {name: runtime.site.root.resolve() for name, runtime in pages.sites.items()}
        self._new_in = new_in
        self._tried: dict[Path, tuple[tuple[str, float, int], ...]] = {}  # new folders that did not load, as they were
        self._unloaded: set[str] = set()  # the folder names of those, as config_errors has them
        # sites added and not watched yet, as their files were then: loaded again once their watch runs if they
        # changed meanwhile (a copy that was still arriving)
        self._fresh: dict[str, tuple[tuple[str, float, int], ...]] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    def reload(self, name: str) -> bool:
        """Load site ``name`` from its folder again and serve it from the next request on; on an error keep the
        last good config and record the error for its pages. Whether the new config is served."""
        old = self.pages.sites[name]
        try:
            site = load_site(old.site.root)  # the folder as the developer named it, so errors name it so too
            if site.name != name:
                # (a name another site has: a restart refused both, which the fix said would serve it)
                taken = site.name in self.pages.sites
                raise SiteConfigError(
                    self._roots[name] / "site.toml",
                    "name",
                    f"changed from {name!r} to {site.name!r} while serving"
                    + (
                        f", the name of another site served here ({self.pages.sites[site.name].site.root})"
                        if taken
                        else ""
                    ),
                    "put the name back, or give it one no other site has and restart genui serve"
                    if taken
                    else "restart genui serve to serve the site under its new name, or put the name back",
                )
            runtime = SiteRuntime.build(site, old.mount, old.base)
        except (SiteConfigError, OSError, RecursionError) as err:  # OSError: a file removed or unreadable mid-save
            self.pages.config_errors[name] = str(err)
            log.error("site %s not reloaded; still serving its last good config: %s", name, err)
            return False
        self.pages.sites[name] = runtime
        self.pages.config_errors.pop(name, None)
        self.pages.reader.site_reloaded(name, runtime)
        log.info("site %s reloaded", name)
        self._say_unserved(old, runtime)
        if added := [key for key in site.carry if key not in old.site.carry]:
            # links are routed as a page is stored: one written before keeps its links (a team thought carry broken)
            log.info(
                "site %s: pages written before now carry %s on only from their next version (Regenerate, or "
                "genui cache forget %s PATH)",
                name,
                ", ".join(added),
                name,
            )
        # an earlier genui's pages of the files as they are now (a template put back as it was) are stored pages
        # (posts under a URL a route now moves are moved at the next start, not by an edit perhaps undone); a page
        # cache another process holds past the busy timeout leaves them for the next reload or start
        try:
            take_up(self.pages.store, runtime, move=False)
        except sqlite3.OperationalError as err:
            log.warning(
                "site %s: an earlier genui's pages were not adopted (%s); the next reload or start will", name, err
            )
        return True

    def _say_unserved(self, old: SiteRuntime, new: SiteRuntime) -> None:
        """Say how many stored pages the edit leaves unserved: those of its routes whose templates or settings
        changed (each page's cache key holds them). A team that had curated pages for a demo changed the site's title
        and saw them written again from the start, the log saying only that the site was reloaded (a review)."""
        name = new.site.name
        gone = {old.prompts.version(route) for route in old.site.routes} - {
            new.prompts.version(route) for route in new.site.routes
        }
        model = self.pages.model_id
        if not gone or model is None:
            return
        try:  # (down the templates' index: a reload runs on the event loop)
            pages, versions = self.pages.store.counted(name, model, gone)
        except sqlite3.OperationalError:  # another process holds the page cache: nothing said, nothing lost
            return
        if pages:
            log.warning(
                "site %s: %s stored with the config before this edit (%s) %s not served with it, as each page's "
                'cache key holds its route\'s templates and settings (docs/sites.md, "Working on a site"); putting '
                "the edit back serves them again, and genui cache show lists them",
                name,
                counted(pages, "page"),
                counted(versions, "version"),
                "is" if pages == 1 else "are",
            )

    def add_new(self) -> list[str]:
        """Serve the sites made under ``new_in`` since the last look that load (at /{name}); log those that do not,
        once until their files change. The names of the sites added."""
        if self._new_in is None:
            return []
        served = set(self._roots.values())
        added = []
        folders = site_folders(self._new_in)
        for gone in self._unloaded - {folder.name for folder in folders}:  # removed or renamed: said no more
            self._unloaded.discard(gone)
            self.pages.config_errors.pop(gone, None)
        for folder in folders:
            root = folder.resolve()
            if root in served or self._tried.get(root) == (state := _state(root)):
                continue
            if self._alone:  # said once: a site served alone is at /, and two sites are each at /{name}
                self._tried[root] = state  # said again only when its files change
                (only,) = self.pages.sites
                log.warning(
                    "new site in %s not served: %s is served alone, at %s/; restart genui serve to serve both, each at"
                    " %s/NAME",
                    folder,
                    only,
                    self.pages.base,
                    self.pages.base,
                )
                continue
            try:
                site = load_site(folder)
                if site.name in self.pages.sites:
                    raise SiteConfigError(
                        folder / "site.toml",
                        "name",
                        f"{site.name!r} is the name of {self._roots[site.name] / 'site.toml'} too, which is served",
                        "give the new site another name",
                    )
                if self.pages.base.split("/")[1:2] == [site.name]:
                    raise SiteConfigError(
                        folder / "site.toml",
                        "name",
                        f"{site.name!r} begins the server's base path {self.pages.base} (genui serve --base-path):"
                        " behind a proxy that cuts that off, its pages could not be told from the server's",
                        "give the new site another name",
                    )
                runtime = SiteRuntime.build(site, f"{self.pages.base}/{site.name}", self.pages.base)
            except Exception as err:  # noqa: BLE001 - SiteConfigError, OSError (a file gone mid-copy), or a bug
                self._tried[root] = state
                log.error("new site in %s not served: %s", folder, err)
                # and said where the developer looks: at /{folder}/ and in /_genui/health (it was in the log alone)
                if folder.name not in self.pages.sites:
                    self.pages.config_errors[folder.name] = str(err)
                    self._unloaded.add(folder.name)
                continue
            self._tried.pop(root, None)
            if folder.name in self._unloaded:  # (not a served site's own error, of the same name)
                self._unloaded.discard(folder.name)
                self.pages.config_errors.pop(folder.name, None)
            self.pages.sites[site.name] = runtime
            self.pages.metrics.served([site.name])  # its series from 0, as the others' from the start
            self._roots[site.name] = root
            # listed among the others as at start-up (genui.sites.site_folders: by folder), not last
            ordered = sorted(self.pages.sites.items(), key=lambda item: str(item[1].site.root))
            self.pages.sites.clear()
            self.pages.sites.update(ordered)
            self._fresh[site.name] = state
            added.append(site.name)
            log.info("new site %s served at %s", site.name, runtime.mount)
            try:
                take_up(self.pages.store, runtime, move=False)
            except sqlite3.OperationalError as err:
                log.warning("site %s: an earlier genui's pages were not adopted (%s); a restart will", site.name, err)
        return added

    def changed(self, paths: Iterable[str]) -> set[str]:
        """The sites whose folders hold any of ``paths`` (as the watcher reports them: under the roots it watches,
        symbolic links inside a site left as they are)."""
        touched = [Path(path) for path in paths]
        return {name for name, root in self._roots.items() if any(path.is_relative_to(root) for path in touched)}

    async def _watch(self) -> None:
        """Watch the folders there are; when one goes, comes back or is made anew (a `git checkout` that drops a
        site's folder and makes it again, at once), watch again, and load a folder made anew as if it had changed."""
        try:
            folders, moved = self._folders(), set[str]()
            while not self._stop.is_set():
                again = asyncio.Event()  # a folder went, came back or was made anew, or the server stops
                poll = asyncio.get_running_loop().create_task(self._until_folders_change(folders, again))
                try:
                    watched = [name for name, folder in folders.items() if folder]
                    gone = await self._watch_folders(watched, again, moved)
                finally:
                    poll.cancel()
                now = self._folders()
                # the sites whose folders went, came back or were made anew: loaded once the next watch runs (a
                # folder still being copied in place is read whole then), a folder gone said on the site's pages;
                # a site new to the server too, which was loaded as it was found, perhaps before its copy ended
                moved = {name for name, folder in now.items() if name in folders and folder != folders[name]}
                moved |= {name for name in gone if name in now}
                moved |= set(self._fresh)  # each loaded again unless its files are as they were (_reload_moved)
                folders = now
        except Exception:  # a watcher that cannot run must not take the server down with it
            log.exception("watching the sites' folders for changes failed; --reload is off from now on")

    def _folders(self) -> dict[str, tuple[int, int] | None]:
        """Each site's folder as the file system knows it (device and inode), None where there is none."""
        found: dict[str, tuple[int, int] | None] = {}
        for name, root in self._roots.items():
            try:
                status = root.stat()
                found[name] = (status.st_dev, status.st_ino) if root.is_dir() else None
            except OSError:
                found[name] = None
        return found

    async def _watch_folders(self, names: list[str], again: asyncio.Event, moved: set[str]) -> set[str]:
        """Reload ``moved`` once the watch runs, then the sites whose files change, until ``again`` is set or a
        site's folder itself is deleted (its watch dies with it, though a folder made at once in its place may have
        its very inode); the sites whose folders were deleted."""
        if not names:
            for name in sorted(moved):
                self._reload_moved(name)
            await again.wait()
            return set()
        roots = {str(self._roots[name]): name for name in names}
        # yield_on_timeout: a first (empty) answer once the watch runs, so that what changes from then on is seen
        watch = watchfiles.awatch(
            *sorted(roots), stop_event=again, debounce=DEBOUNCE_MS, rust_timeout=WATCH_READY_MS, yield_on_timeout=True
        )
        try:
            async for changes in watch:
                gone = {
                    roots[path] for change, path in changes if change == watchfiles.Change.deleted and path in roots
                }
                for name in sorted((self.changed(path for _, path in changes) | moved) - gone):
                    self._reload_moved(name)
                moved = set()
                if gone:
                    return gone
        except FileNotFoundError:  # a folder gone between the look and the watch's start (a checkout that remakes it)
            await asyncio.sleep(FOLDERS_POLL_S)
            # those still to be loaded again too: the caller loads again each name it gets whose folder is there
            return {name for name in names if not self._roots[name].is_dir()} | moved
        return set()

    async def _until_folders_change(self, folders: dict[str, tuple[int, int] | None], again: asyncio.Event) -> None:
        """Set ``again`` once a site's folder goes, comes back or is made anew, or a new site is served."""
        while not self._stop.is_set() and self._folders() == folders and not self._add_new_logged():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), FOLDERS_POLL_S)
        again.set()

    def _add_new_logged(self) -> bool:
        try:
            return bool(self.add_new())
        except Exception:  # noqa: BLE001 - a bug here must not end the watching of the sites served
            log.exception("looking for new sites under %s failed", self._new_in)
            return False

    def _reload_moved(self, name: str) -> None:
        """Load site ``name`` again, unless it is a site just added whose files are as they were when it loaded."""
        fresh = self._fresh.pop(name, None)
        if fresh is None or fresh != _state(self._roots[name]):
            self._reload_logged(name)

    def _reload_logged(self, name: str) -> None:
        try:
            self.reload(name)
        except Exception as err:  # noqa: BLE001 - a bug in one reload must not end the watching
            self.pages.config_errors[name] = f"reloading failed: {err!r}"
            log.exception("site %s not reloaded", name)


def _state(folder: Path) -> tuple[tuple[str, float, int], ...]:
    """What a site folder's files are as of now, cheaply: each entry of the folder, and every file under its
    prompts/ and assets/ (an opening's image), with the time it last changed and its size (a copy still arriving,
    an edit, a file put in place, changes it)."""
    found = []
    for path in (*_entries(folder), *(folder / "prompts").rglob("*"), *(folder / ASSETS_DIR).rglob("*")):
        with contextlib.suppress(OSError):
            status = path.stat()
            found.append((str(path), status.st_mtime, status.st_size))
    return tuple(sorted(found))


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []
