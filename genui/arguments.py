"""What the genui commands share: the one-line error a user can fix, and reading sites, paths, counts and options
from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from genui.routing import VERSION_KEY, BadRequest, Location, base_path_of, untaken_keys
from genui.runtime import SiteRuntime
from genui.sites import Problems, Site, SiteConfigError, check_names, combined, load_site, site_folders

if TYPE_CHECKING:
    from genui.app import OwnedEngine

USAGE_ERROR = 2

EngineLoader = Callable[[str | None, str | None, bool], "OwnedEngine"]  # (model, device, int8) -> a started engine


class UsageError(Exception):
    """Something the user can fix; the message is the one line genui prints."""


def model_id_of(model: str | None) -> str:
    """The id a server of ``model`` (None: the default) keys its page cache on, found without torch."""
    from engine.identity import model_id  # no torch: a few small reads

    return model_id(model)


def no_sites(directory: Path | str) -> UsageError:
    """The error for a sites folder with no site in it; a site's own folder says so, with the folder to name."""
    folder = Path(directory)
    if (folder / "site.toml").is_file():
        return UsageError(
            f"{directory} is a site's folder, not a folder of sites: name the folder it is in (--sites-dir "
            f"{folder.resolve().parent}), or the site itself where a command takes SITE"
        )
    return UsageError(f"no sites under {directory} (a site is a folder with site.toml; genui new NAME writes one)")


def loading_sites(directory: Path) -> tuple[list[Site], list[SiteConfigError]]:
    """Every site under ``directory`` that loads (its config and templates, as genui serve builds them), and the
    errors of those that do not: ``genui serve --reload`` serves the first and the others once they load (a team's
    half-written site stopped everyone's restart). None loading is their errors, as one; none at all, UsageError."""
    folders = site_folders(directory)
    if not folders:
        raise no_sites(directory)
    sites, broken = [], []
    for folder in folders:
        try:
            site = load_site(folder)
            SiteRuntime.build(site, "")  # its templates tried with sample values, as a server's start tries them
        except SiteConfigError as err:
            broken.append(err)
            continue
        sites.append(site)
    if not sites:
        raise combined(broken)
    check_names(sites)
    return sites, broken


def sites_in(directory: Path, names: list[str] | None) -> list[Site]:
    """The sites under ``directory``: those named, or all; UsageError when there are none or a name is unknown.
    With names, a folder that does not load is no matter once every site named is found (a half-written new site
    beside them; it is said on stderr): which site it is cannot be told until it loads."""
    if not names:
        problems = Problems()
        sites = [site for folder in site_folders(directory) if (site := problems.check(load_site, folder))]
        if problems.found:  # the others' templates too, so that one run says every problem (a server tries them)
            for site in sites:
                problems.check(SiteRuntime.build, site, "")
            problems.raise_found()
        if not sites:
            raise no_sites(directory)
        check_names(sites)
        return sites
    sites, broken = [], []
    for folder in site_folders(directory):
        try:
            sites.append(load_site(folder))
        except SiteConfigError as err:
            broken.append(err)
    by_name = {site.name: site for site in sites}
    missing = [name for name in names if name not in by_name]
    if missing and broken:
        raise combined(broken)  # one may be the site asked for
    if not sites:
        raise no_sites(directory)
    if missing:
        said = f"no site named {missing[0]!r} under {directory} (have: {', '.join(sorted(by_name))})"
        raise UsageError(said + made_here(missing[0], directory))
    check_names([site for site in sites if site.name in names])  # a copy of another site beside them is no matter
    for left_out in broken:
        print(f"note: left out, not asked for and not loading: {left_out}", file=sys.stderr)
    return [by_name[name] for name in dict.fromkeys(names)]


def site_from(name_or_folder: str, directory: Path) -> Site:
    """A site by its folder, or by its name under ``directory``."""
    folder = Path(name_or_folder)
    if (folder / "site.toml").is_file():
        return load_site(folder)
    return sites_in(directory, [name_or_folder])[0]


def located(site: Site, path: str, mounts: Collection[str] = ()) -> Location:
    """The page of ``site`` at a site-relative URL, or UsageError. A page's address as a browser shows it serves
    too: a whole URL (`http://127.0.0.1:8000/recipes/Pancakes`), its path under the site's name read first as the
    site's own (genui serve puts each site under /NAME where it serves several: `http://…/wiki/` is the wiki's front
    page, not an article "Wiki"), and a bare path under the site's name where the site's routes match nothing. A
    server under a base path (genui serve --base-path /team3) shows `http://…/team3/wiki/Lisp`: a whole URL's path
    is read first under each of ``mounts`` it starts with (where the site's pages were served, as the page cache
    knows them: `/team3` for one site served alone there), the longest first, and last, where nothing else names a
    page, under the first of its segments that names the site; a bare path is read so after it is read as it is."""
    try:
        parts = urlsplit(path)
    except ValueError as err:  # "http://[": no URL at all
        raise UsageError(f"bad path {path!r}: {err}") from None
    whole = parts.scheme in ("http", "https")
    # a version's address (`?v=2`, as the toolbar's links show it) names its page: every version is the page's
    kept = "&".join(part for part in parts.query.split("&") if unquote(part.partition("=")[0]) != VERSION_KEY)
    if whole or kept != parts.query:
        path = f"{parts.path or '/'}?{kept}" if kept else parts.path or "/"
    runtime = SiteRuntime.build(site, "")
    known = [_under(path, mount) for mount in sorted(mounts, key=len, reverse=True) if mount]
    segments = parts.path.split("/")
    named = "/".join(segments[: segments.index(site.name, 1) + 1]) if site.name in segments[1:] else None
    further = _under(path, named) if named else None  # under the site's name further in: /team3/wiki/Lisp
    if whole:  # under a mount the cache knows, under the site's name, as it is, under its name further in
        readings = [*known, _under(path, f"/{site.name}"), path, further]
    else:  # as it is first; then as a whole URL's path is read (a path copied from an access log)
        readings = [path, _under(path, f"/{site.name}"), *known, further]
    problems = []
    for reading in dict.fromkeys(reading for reading in readings if reading is not None):  # the first that names a page
        try:
            location = runtime.locate(reading)
        except BadRequest as err:
            problems.append(f"bad path {reading!r}: {err}")
            continue
        if location is None:
            patterns = ", ".join(route.pattern for route in site.routes)
            problems.append(f"no route of site {site.name!r} matches {reading!r} (routes: {patterns})")
        elif untaken := untaken_keys(reading, location):  # as a navigation link's: another page than asked for
            problems.append(untaken)
        else:
            return location
    raise UsageError(problems[0])


def _under(path: str, mount: str) -> str | None:
    """``path`` (a query may follow it) as the URL under ``mount`` it is, or None where it is not under it."""
    if path != mount and not path.startswith((f"{mount}/", f"{mount}?")):
        return None
    under = path[len(mount) :]
    return under if under.startswith("/") else "/" + under


MOST = 2**63 - 1  # the largest whole number SQLite stores: a count or an id past it is no row's


def count(text: str) -> int:
    """A command-line count: 0 or a positive whole number (at most MOST)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MOST:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive whole number up to {MOST}, got {text!r}")
    return value


def days(text: str) -> int:
    """A command-line number of days: a whole number from 1 to 36,500 (a hundred years)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 36_500:
        raise argparse.ArgumentTypeError(f"expected a whole number of days from 1 to 36500, got {text!r}")
    return value


def base_path(text: str) -> str:
    """A command-line base path (genui serve --base-path), as create_app takes it (genui.routing.base_path_of)."""
    try:
        return base_path_of(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


ROBOTS_MOST = 500 * 1024  # bytes of a robots.txt that crawlers read (Google's limit; the rest is ignored)


def made_here(name: str, directory: str | Path) -> str:
    """What to add to "no site named NAME under DIRECTORY" where `genui new` made that site in ./sites, the folder it
    writes to from the one it is run in: "; ./sites/NAME is one: add --sites-dir sites"; "" otherwise."""
    here = Path("sites")
    if (here / name / "site.toml").is_file() and here.resolve() != Path(directory).resolve():
        return f"; ./sites/{name} is one: add --sites-dir sites"
    return ""


def sites_here_too(directory: str | Path, command: str) -> str | None:
    """A note for a command reading the sites in ``directory`` while ./sites, where `genui new` writes a site from the
    folder it is run in, holds sites too: how ``command`` takes those instead; None where it holds none."""
    here = Path("sites")
    if here.resolve() == Path(directory).resolve() or not here.is_dir() or not (others := site_folders(here)):
        return None
    names = ", ".join(folder.name for folder in others)
    return f"note: ./sites holds sites too ({names}): genui {command} --sites-dir sites"


def robots_file(path: str) -> str:
    """A command-line robots.txt: the text of a UTF-8 file, at most ROBOTS_MOST bytes."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > ROBOTS_MOST:
        raise argparse.ArgumentTypeError(f"{path} has {len(data):,} bytes; crawlers read {ROBOTS_MOST:,} at most")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{path} is not UTF-8 text, as a robots.txt must be") from None


def shared(parsers: list[argparse.ArgumentParser], *names: str, default: object = None, **options: Any) -> None:
    """An option of a command and of each of its actions (the first parser, then the rest), so that it may come
    before or after the action's name: ``genui cache --db X prune`` is ``genui cache prune --db X``. An action's
    copy sets nothing when not given, so as not to undo the command's; a repeatable one is kept apart and joined to
    the command's by ``joined``."""
    top, *actions = parsers
    top.add_argument(*names, default=default, **options)
    dest = options.get("dest") or names[0].lstrip("-").replace("-", "_")
    _TAKEN[(top.prog.split()[-1], dest)] = (names[0], default, frozenset(a.prog.split()[-1] for a in actions))
    if options.get("action") == "append":
        _REPEATED[AFTER + dest] = dest
        options = {**options, "dest": AFTER + dest}
    for action in actions:
        action.add_argument(*names, default=argparse.SUPPRESS, **options)


AFTER = "after_"  # where an action keeps a repeatable option given after its name
_REPEATED: dict[str, str] = {}  # those places, to the command's own dest
_TAKEN: dict[tuple[str, str], tuple[str, object, frozenset[str]]] = {}  # (command, dest): option, default, actions


def misplaced(args: argparse.Namespace) -> str | None:
    """An option given before an action's name that the action does not take (``genui cache --json prune``), in
    words; None when there is none."""
    for (command, dest), (option, default, actions) in _TAKEN.items():
        if getattr(args, "command", None) != command or getattr(args, "action", None) in actions:
            continue
        if getattr(args, dest, default) != default:
            return f"{option} is not an option of {command} {args.action} (only of {', '.join(sorted(actions))})"
    return None


def not_taken(args: argparse.Namespace, extras: list[str]) -> str | None:
    """An option given after an action's name that the action does not take but another of the command's does
    (``genui posts delete 3 --sites-dir x``), in words; None when ``extras`` holds none."""
    for extra in extras:
        given = extra.split("=", 1)[0]
        for (command, _), (option, _, actions) in _TAKEN.items():
            if getattr(args, "command", None) == command and given == option:
                return f"{option} is not an option of {command} {args.action} (only of {', '.join(sorted(actions))})"
    return None


def misplaced_before(argv: list[str], actions_of: dict[str, frozenset[str]]) -> str | None:
    """An option given after an action's name that the action does not take but another of the command's does, read
    from ``argv`` before it is parsed: followed by the action's own arguments, its value is read as one of them
    (``genui posts delete --sites-dir x 3`` said "expected a whole number, got 'x'"). ``actions_of``: each
    command's actions. None when there is none, or the command line is some other mistake."""
    if not argv or argv[0] not in actions_of:
        return None
    command, rest = argv[0], argv[1:]
    action = next((word for word in rest if word in actions_of[command]), None)
    if action is None:
        return None
    for word in rest[rest.index(action) + 1 :]:
        if word == "--":
            break
        given = word.split("=", 1)[0]
        for (taker, _), (option, _, actions) in _TAKEN.items():
            if taker == command and given == option and action not in actions:
                return f"{option} is not an option of {command} {action} (only of {', '.join(sorted(actions))})"
    return None


def joined(args: argparse.Namespace) -> argparse.Namespace:
    """The values of a repeatable option given before an action's name and after it, as one list."""
    for after, dest in _REPEATED.items():
        if hasattr(args, after):
            setattr(args, dest, (getattr(args, dest, None) or []) + getattr(args, after))
            delattr(args, after)
    return args
