"""``genui new``: a working site folder from a name and a one-line description.

The routes and prompt shapes mirror the wiki's (home, article, search), because those are the pages the default
model has learned to write and the links it has learned to make; a site trained into its own model can rename them.
``--from`` starts from an example site instead (the forum, the desktop, the wiki; or any site folder): its routes,
prompts, openings, navigation and stylesheet, under the new name.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import tomllib
from pathlib import Path

from genui.resources import bundled
from genui.sites import Site, SiteConfigError, check_site_name, combined, load_site

DEFAULT_DESCRIPTION = "A small web site whose pages are written on the fly."

_SITE_TOML = """\
# {title}: every page is written by the model the first time someone asks for it.
# The keys are documented in docs/sites.md.
name = {name}
title = {title_toml}
brief = {brief}
stylesheet = {stylesheet}
{lang}
[model]
tokens = 512   # the most tokens a page may take; most stop earlier (end of text)
# steps = 24   # the most denoising steps a canvas may take (default: the model's); most stop earlier
# The sampler, when this site wants other than the model's generation_config.json (docs/sites.md):
# t_max = 0.5          # temperature at the first denoising step ...
# t_min = 0.2          # ... falling to this at the last (lower: tidier, fewer steps)
# entropy_bound = 1.0  # uncertainty one step may accept (higher: fewer steps, more broken pages)

[[routes]]
pattern = "/"
template = "home.j2"
opening = "home_opening.j2"   # the home starts as the wiki's does; without it the model writes other sites' pages
context = ["brief"]

[[routes]]
pattern = "/search"   # before the articles, which would take it for an article called "search"
template = "search.j2"
query = ["q"]
context = ["brief"]

# A page that asks a visitor for several values has a form genui draws above it (docs/sites.md, "A route's form").
# To have one, remove the "# " below and write prompts/compare.j2 (it reads query.first and query.second). A form
# has no box in the site bar: visitors reach it by a link, so add one to "Start with" below,
# {{ label = "Compare", url = "/compare" }}.
# [[routes]]
# pattern = "/compare"   # before the articles, as /search is
# template = "compare.j2"
# query = ["first", "second"]
# form = {{ fields = {{ first = "Compare", second = "with" }}, button = "Compare" }}

[[routes]]
pattern = "/{{title}}"
aliases = ["/wiki/{{title}}"]   # how the default model writes article links; a request for one is redirected here
spaces = "_"   # /Some title is redirected to /Some_title: one page, one URL
case = {{ title = "upper-first" }}   # and so is /some_title
template = "article.j2"
opening = "article_opening.j2"   # every article starts with its title; the model writes the rest
context = ["brief", "parent"]

# Ways on from the home page that genui adds below whatever the model writes there, so no visitor is stuck.
[[navigation]]
on = ["/"]
heading = "Pages written so far"
pages = "/{{title}}"   # the pages already in the page cache, newest first

[[navigation]]
on = ["/"]
heading = "Start with"
links = [
  {{ label = "Getting started", url = "/Getting_started" }},
  {{ label = "History", url = "/History" }},
  {{ label = "Glossary", url = "/Glossary" }},
]

[[navigation]]
on = ["/{{title}}"]   # a page whose text links nowhere is no dead end
heading = "More pages"
pages = "/{{title}}"
limit = 10
"""

_PROMPTS = {
    "home.j2": "<site>{{ site.title }}: {{ site.brief }}</site>\n<page>home</page>\n",
    "article.j2": (
        "<site>{{ site.title }}: {{ site.brief }}</site>\n<page>article</page>\n"
        '<title>{{ params.title | replace("_", " ") }}</title>\n'
        "{% if parent %}<from>{{ parent.title }}</from>\n{% endif %}"
    ),
    "search.j2": "<site>{{ site.title }}: {{ site.brief }}</site>\n<page>search</page>\n<query>{{ query.q }}</query>\n",
    "article_opening.j2": '<article class="wiki">\n<h1>{{ params.title | replace("_", " ") }}</h1>\n',
    "home_opening.j2": (
        '<div class="home">\n<h1>Welcome to {{ site.title }}</h1>\n<p>{{ site.brief }}</p>\n'
        '<h2>Featured article: <a href="/wiki/'
    ),
}

_CSS = """\
/* {title}: the look of the generated pages. genui.css styles the bar and the chrome around them. */
.genui-page {{ background: #fff; border: 1px solid #d8dde5; border-radius: 8px; padding: 1.25rem 1.75rem; }}
.genui-page h1 {{ margin-top: 0; font-size: 1.9rem; }}
.genui-page h2 {{ margin-top: 1.5rem; font-size: 1.25rem; }}
.genui-page p {{ max-width: 42rem; }}
.genui-page a {{ color: #2b4c7e; }}

/* Where the reader's system is dark (delete this block to keep the site light): `color-scheme: dark` makes genui's
   bar, toolbar and forms dark too, in a browser that has light-dark() (2024 on; an older one keeps the site light). */
@supports (color: light-dark(#000, #fff)) {{
  @media screen and (prefers-color-scheme: dark) {{
    :root {{ color-scheme: dark; }}
    .genui-page {{ background: #1d222a; border-color: #343b47; }}
    .genui-page a {{ color: #8db4ec; }}
  }}
}}
"""


def title_from_name(name: str) -> str:
    return " ".join(part.capitalize() for part in name.replace("_", "-").split("-") if part) or name


# How every corpus page of these example sites' front pages starts (data/corpus.jsonl). The examples need no opening
# there: the model writes those lines as it was trained to, their title included. Under a new title it wrote the
# desktop's window instead, on every seed measured (bench/front_pages.py), so a copy made with --from gets one.
FRONT_OPENINGS = {
    "forum": '<div class="front">\n<h1>{{ site.title }}</h1>\n<ul class="threads">\n<li><a href="/r/',
    "wiki": _PROMPTS["home_opening.j2"],
}
FRONT_OPENING = "front_opening.j2"


def add_front_opening(folder: Path, example: Site) -> None:
    """Give the copy of ``example`` in ``folder`` its front page's opening (FRONT_OPENINGS), if it has none."""
    front = next((route for route in example.routes if route.pattern == "/"), None)
    if example.name not in FRONT_OPENINGS or front is None or front.opening is not None:
        return
    (folder / "prompts" / FRONT_OPENING).write_text(FRONT_OPENINGS[example.name], encoding="utf-8")
    toml = (folder / "site.toml").read_text(encoding="utf-8")
    line, note = f'template = "{front.template}"\n', "# the front page starts as the corpus's front pages do"
    (folder / "site.toml").write_text(toml.replace(line, f'{line}opening = "{FRONT_OPENING}"   {note}\n', 1), "utf-8")


class NoExample(ValueError):
    """``--from`` names no site: neither an example nor a site folder (a message naming what it may name)."""


def example_folder(example: str, directory: Path | None = None) -> Path:
    """The site folder ``--from`` names: an example site shipped with genui (``genui sites``) by its bare name, or a
    site folder by its path (``./wiki``, ``sites/wiki``: a folder of one's own, even one named like an example); a
    bare name that is no example is also looked for beside the new site (in ``directory``)."""
    shipped = bundled("sites")
    if Path(example).name == "site.toml" and Path(example).is_file():  # the site's file, meaning its folder
        example = str(Path(example).parent)
    bare = re.fullmatch(r"[a-z][a-z0-9_-]*", example) is not None
    near: tuple[Path, ...] = (directory / example,) if bare and directory is not None else ()
    candidates: tuple[Path, ...] = (shipped / example, Path(example), *near) if bare else (Path(example),)
    for folder in candidates:
        if example and (folder / "site.toml").is_file():
            return folder
    names = ", ".join(sorted(p.parent.name for p in shipped.glob("*/site.toml")))
    path = example if Path(example).is_absolute() or example.startswith(".") else f"./{example}"
    problem = "a folder with no site.toml" if Path(example).is_dir() else "no example site or site folder of that name"
    beside = f", or a site in {directory}" if bare and directory is not None else ""
    raise NoExample(f"--from {example}: {problem}; name one of {names}, a site folder by its path ({path}){beside}")


def _set_key(toml: str, key: str, value: str) -> str:
    """``toml`` with its top-level ``key`` (a one-line value, before the first table) set to ``value`` (TOML)."""
    first_table = re.search(r"^\[", toml, re.M)
    head, tables = (toml[: first_table.start()], toml[first_table.start() :]) if first_table else (toml, "")
    line = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    head = line.sub(lambda _: f"{key} = {value}", head, count=1) if line.search(head) else f"{head}{key} = {value}\n"
    return head + tables


def _copy_example(source: Site, draft: Path, name: str, title: str, brief: str | None, lang: str | None) -> None:
    """The example's files in ``draft``, renamed: site.toml's name and title (and brief, if given), and the
    stylesheet's selectors for the example's body class (``.site-forum``) and its title. A shipped example whose front
    page has no opening gets one (FRONT_OPENINGS)."""
    ignored = shutil.ignore_patterns("__pycache__", ".*")
    shutil.copytree(source.root, draft, dirs_exist_ok=True, ignore=ignored, ignore_dangling_symlinks=True)
    toml = (draft / "site.toml").read_text(encoding="utf-8")
    wanted = {"name": name, "title": title} | ({"brief": brief} if brief is not None else {})
    wanted |= {"lang": lang} if lang is not None else {}
    for key, value in wanted.items():
        toml = _set_key(toml, key, json.dumps(value, ensure_ascii=False))
        try:
            rewritten = tomllib.loads(toml)
        except tomllib.TOMLDecodeError:
            rewritten = {}
        if rewritten.get(key) != value:  # a quoted key, or a value over several lines, which _set_key leaves
            raise SiteConfigError(
                source.root / "site.toml",
                key,
                "genui new --from rewrites this key's line, and could not",
                f'write it on one line as {key} = "..." (a bare key) in the site it is made from',
            )
    (draft / "site.toml").write_text(toml, encoding="utf-8")
    if source.root.resolve().parent == bundled("sites").resolve():
        add_front_opening(draft, source)
    if source.stylesheet:
        css = draft / source.stylesheet
        try:
            text = css.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise SiteConfigError(
                source.root / source.stylesheet, "stylesheet", f"not UTF-8 ({err})", "save it as UTF-8"
            ) from None
        text = re.sub(rf"\.site-{re.escape(source.name)}(?![\w-])", f".site-{name}", text)
        css.write_text(_retitle_comments(text, source.title, title), encoding="utf-8")


def _retitle_comments(css: str, old: str, new: str) -> str:
    """``css`` with the site's title ``old``, as a whole word, made ``new`` in its comments and in the text it shows
    (``content: "From Genpedia, ..."``): the rest's words (a font called "Fira Code" in a copy of a site called
    "Code") stay as they are."""
    word = re.compile(rf"(?<![\w-]){re.escape(old)}(?![\w-])")
    shown = r"/\*.*?\*/|\bcontent\s*:\s*(?:\"[^\"]*\"|'[^']*')"

    def said(part: re.Match[str]) -> str:  # the new title as the comment or the string it goes in can hold it
        if part[0].startswith("/*"):
            fitted = new.replace("*/", "* /")
        else:
            quote = part[0].rstrip()[-1]
            fitted = new.replace("\\", "\\\\").replace(quote, "\\" + quote)
        return word.sub(lambda _: fitted, part[0])

    return re.sub(shown, said, css, flags=re.S)


def create_site(
    name: str,
    description: str | None = None,
    directory: Path | str = "sites",
    example: str | None = None,
    title: str | None = None,
    lang: str | None = None,
) -> Site:
    """Write ``directory/name`` (site.toml, prompts/, name.css; or ``example``'s files, renamed) and return it
    loaded. The description is the prompts' brief (an example keeps its own unless given); ``title`` is what
    visitors see (default: made from the name), ``lang`` the pages' language (site.toml's ``lang``; an example keeps
    its own unless given). Nothing is left on failure."""
    directory = Path(directory)
    target = directory / name
    check_site_name(target / "site.toml", name)
    if os.path.lexists(target):
        raise FileExistsError(f"{target} already exists; pick another name or remove it")
    if directory.exists() and not directory.is_dir():
        raise FileExistsError(f"{directory} is a file, not a folder; name a folder for the site (--dir)")
    _check_name_free(directory, name)
    source = load_site(example_folder(example, directory)) if example is not None else None
    if source is not None:
        _check_servable(source, source.root)
    given = " ".join("".join(ch if ch.isprintable() else " " for ch in description or "").split()) or None
    brief = given or DEFAULT_DESCRIPTION
    title = (title or "").strip() or title_from_name(name)
    made = [folder for folder in (directory, *directory.parents) if not folder.exists()]
    directory.mkdir(parents=True, exist_ok=True)
    draft = directory / f".{name}-{secrets.token_hex(4)}"  # hidden: load_sites skips it while it is written
    try:
        draft.mkdir()  # under the umask, as the site's folder should be (mkdtemp's would be 0700)
        mode = draft.stat().st_mode
        if source is not None:
            _copy_example(source, draft, name, title, given, lang)
            draft.chmod(mode)  # copytree gave it the example's
            _check(draft, target)
            draft.rename(target)
            return load_site(target)
        (draft / "prompts").mkdir()
        for file, text in _PROMPTS.items():
            (draft / "prompts" / file).write_text(text, encoding="utf-8")
        # (a title's "*/" would end the stylesheet's first comment)
        (draft / f"{name}.css").write_text(_CSS.format(title=title.replace("*/", "* /")), encoding="utf-8")
        # json.dumps writes a valid TOML basic string for printable text (the brief has no control characters left).
        toml = _SITE_TOML.format(
            name=json.dumps(name),
            title=title,
            title_toml=json.dumps(title, ensure_ascii=False),
            brief=json.dumps(brief, ensure_ascii=False),
            stylesheet=json.dumps(f"{name}.css"),
            lang=f"lang = {json.dumps(lang)}   # the pages' language; genui's words in it: [words] (docs/sites.md)\n"
            if lang
            else "",
        )
        (draft / "site.toml").write_text(toml, encoding="utf-8")
        _check(draft, target)
        draft.rename(target)
    except BaseException:
        shutil.rmtree(draft, ignore_errors=True)
        for folder in made:  # the folders of --dir this call made, innermost first, if nothing else is in them
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return load_site(target)


def _check_name_free(directory: Path, name: str) -> None:
    """Refuse a name another site under ``directory`` already has (in a folder of another name): both would be
    served at /name, and genui serve refuses two sites of one name."""
    for toml in sorted(directory.glob("*/site.toml")) if directory.is_dir() else ():
        if toml.parent.name.startswith("."):
            continue
        try:
            other = tomllib.loads(toml.read_text(encoding="utf-8")).get("name")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # a broken site is its own error, not this one's
        if other == name:
            raise FileExistsError(f"{toml} is already a site named {name!r}; pick another name or rename that one")


def _check_servable(site: Site, root: Path) -> None:
    """Raise SiteConfigError, about ``root``, for what genui serve would refuse in ``site``: its routes, links and
    navigation (SiteRouter) and a trial render of every template (PromptRenderer)."""
    from genui.runtime import SiteRuntime  # the runtime imports the sites' loader, which this module is beside

    try:
        SiteRuntime.build(site, "")
    except SiteConfigError as err:  # say it about the folder the user named, not the draft
        raise combined([_about(problem, site.root, root) for problem in err.each]) from None


def _about(err: SiteConfigError, draft: Path, root: Path) -> SiteConfigError:
    """``err`` said of the file in ``root`` that its file in the draft folder will be."""
    file = Path(err.file)
    named = root / file.relative_to(draft) if file.is_relative_to(draft) else file
    return SiteConfigError(named, err.key, err.problem, err.fix)


def _check(draft: Path, target: Path) -> None:
    try:
        site = load_site(draft)
    except SiteConfigError as err:  # say it about the folder the user asked for, not the draft
        raise combined([_about(problem, draft, target) for problem in err.each]) from None
    _check_servable(site, target)
