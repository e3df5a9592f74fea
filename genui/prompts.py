"""Prompt templates: Jinja2 in its sandbox. URL text is data passed to a template, never template code."""

from __future__ import annotations

import functools
import hashlib
import html
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any

from jinja2 import FileSystemLoader, StrictUndefined, TemplateError, TemplateNotFound, UndefinedError, nodes
from jinja2.exceptions import SecurityError, TemplateAssertionError, TemplateRuntimeError, TemplateSyntaxError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

from genui.assets import asset_url
from genui.sites import Problems, Route, Site, SiteConfigError

GAP = "\ue000"  # where an opening's gap() stands in its rendered text: a private-use character no value keeps
_GAP_IN_TAG = re.compile(f"<[^<>]*{GAP}")  # a gap after a tag's `<` and before its `>`


class PromptError(SiteConfigError):
    """A prompt template failed as it was rendered (an undefined variable, a template including itself, a bad call):
    the file and line, what went wrong and the fix. ``public`` says it with the file relative to the sites folder,
    for a page a visitor sees."""

    def __init__(self, file: Path, shown: Path, line: int | None, err: Exception) -> None:
        where = f"line {line}: " if line is not None else ""
        if isinstance(err, UndefinedError) and "'gap' is undefined" in str(err):
            fix = "gap() is for openings only (the route's opening template): take it out of this one"
        elif isinstance(err, UndefinedError) and " has no element " in str(err):
            fix = (
                "an index past a list's end (a URL's value split into fewer parts than the template takes): check "
                "its length first ({% set parts = params.title.split('_') %}{% if parts | length > 1 %}...{% endif %})"
            )
        elif isinstance(err, UndefinedError) and _attribute_of_a_value(str(err)):
            fix = (
                "a parent has .path and .title, a post .user and .text, and a URL's values are text (str's methods "
                "and Jinja2's filters): use one of those"
            )
        elif isinstance(err, UndefinedError):
            fix = (
                "use the variables a template is given: site.title, site.brief, params.<the pattern's names>, "
                "query.<the route's query keys>, parent (none on a first visit) and posts (docs/sites.md), and "
                "guard the ones that may be missing with {% if %}; a macro from an imported file sees them only when "
                "imported with context ({% import 'parts.j2' as parts with context %})"
            )
        elif isinstance(err, TemplateNotFound):
            err = TemplateNotFound(f"{err.name!r} is not a file in prompts/")  # not the server's own path
            fix = "add the file, or pull it in with 'ignore missing'"
        elif isinstance(err, RecursionError):
            fix = "a template includes, imports or extends itself, directly or through another: break the cycle"
        else:
            fix = "correct the template at that line"
        problem = f"rendering it failed at {where}{type(err).__name__}: {err}"
        super().__init__(file, "template", problem, fix)
        self.public = f"{shown}: {problem}. Fix: {fix}"
        self.line = line

    def tried_for(self, route: Route) -> PromptError:
        """The error of rendering it for ``route`` at load: a template may serve several routes, each with its own
        params, and works for one while it fails another."""
        names = ", ".join(f"params.{name}" for name in route.params) or "no params"
        self.problem = f"{self.problem.rstrip('.')} (for the route {route.pattern}, which has {names})"
        name = Path(self.file).name  # the route's key that names the file that failed (an included file: template)
        self.key = next((key for key in ("opening", "reply_opening") if getattr(route, key) == name), "template")
        self.args = (f"{self.file}: key '{self.key}': {self.problem}. Fix: {self.fix}",)
        return self

    def also_for(self, patterns: list[str]) -> None:
        """Say that it fails the same way for the routes of these ``patterns`` too."""
        self.problem = f"{self.problem}; and alike for {', '.join(patterns)}"
        self.args = (f"{self.file}: key '{self.key}': {self.problem}. Fix: {self.fix}",)


# Failures that come of a template's own code, which other values fail the same way (a text added to a number, a
# division by zero, a text called): not a lookup, an index or an include, which the site's own values may pass.
_ANY_VALUES = (TypeError, ZeroDivisionError)
SAMPLE_VALUES = ("Sample", "sample")  # what the trial render puts in a route's parameters, and in its query keys
OTHER_SAMPLE = "Other_sample-value x.y/z"  # and then, to tell a first visit's failure from the values' (_try)


def _attribute_of_a_value(said: str) -> bool:
    """Whether an UndefinedError's message is an attribute a text, a parent or a post has not (`parent.url`), not
    one of the variables' keys (`params.nosuch`, "'dict object' has no attribute")."""
    return " object' has no attribute " in said and not said.startswith("'dict object'")


def _whatever_the_values(err: BaseException | None) -> bool:
    """Whether a template's failure would happen whatever the URL's values: a name or a key it is not given
    (`nosuch`, `params.nosuch`), an attribute that a text, a parent or a post has not (`parent.url`,
    `params.title.capitalise()`), `parent.title` on a first visit, a filter or a test Jinja2 does not have (one in
    an `{% if %}` is only looked up when the branch runs), a template including itself, the sandbox's refusal.
    Anything else may be the sample values' doing (`"Sample".split("-")[1]`) and is left to the pages."""
    if isinstance(err, RecursionError | SecurityError):
        return True
    if not isinstance(err, UndefinedError):
        return isinstance(err, TemplateRuntimeError) and str(err).startswith(("No filter named", "No test named"))
    said = str(err)
    if said.startswith("'dict object' has no attribute") and said.endswith(
        tuple(f"'{v}'" for v in ("", *SAMPLE_VALUES))
    ):
        return False  # a lookup by a URL's value (`{{ panels[params.panel] }}`): the sample's own doing, or the empty
        # query's (`{{ origin[query.q] }}` at a search sent empty)
    return (
        said.endswith(" is undefined")
        or said.startswith(("'dict object' has no attribute", "'None' has no"))
        or _attribute_of_a_value(said)
        or "does not export the requested name" in said  # `{% from "m.j2" import nope %}`
    )


def _failure(site: Site, name: str, err: Exception) -> PromptError:
    """The PromptError for ``err``, raised while rendering template ``name``: at the innermost template line in the
    traceback (Jinja2 writes each template's frames with its file and line), else at ``name``."""
    file, line = site.prompts_dir / name.lstrip("/"), None
    prompts = str(site.prompts_dir)
    traceback = err.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code.co_filename
        if code.startswith(prompts):
            file, line = Path(code), traceback.tb_lineno
        traceback = traceback.tb_next
    try:
        shown = Path(site.name, "prompts", file.relative_to(site.prompts_dir))
    except ValueError:  # pragma: no cover - Jinja2 loads templates from the prompts folder only
        shown = Path(site.name, "prompts", file.name)
    error = PromptError(file, shown, line, err)
    for folder, said in ((site.prompts_dir, f"{site.name}/prompts"), (site.root, site.name)):
        error.public = error.public.replace(str(folder), said)  # an OSError's text names the server's own path
    return error


def gap() -> Markup:
    """A hole in an opening that the model fills with one line of text (engine.gaps)."""
    return Markup(GAP)


def inside_tag_unbroken(opening: str) -> str:
    """A rendered opening without the line breaks it ends with where it stops inside a tag (the forum's board, in its
    first link's href): the newline vim and nano add to every file they save would be part of each page's link, which
    the sanitiser then drops. An opening that stops after a tag keeps them, as written: the page's own."""
    body = opening.rstrip("\r\n")
    return body if body != opening and body.rfind("<") > body.rfind(">") else opening


def split_gaps(opening: str) -> tuple[str, tuple[str, ...]]:
    """A rendered opening as the engine takes it: the text before its first gap, and the text after each gap."""
    first, *after = opening.split(GAP)
    return first, tuple(after)


@dataclass(frozen=True, slots=True)
class Parent:
    """The page a click came from."""

    path: str
    title: str


@dataclass(frozen=True, slots=True)
class Post:
    """A stored user post; its text is data in the prompt, never markup."""

    user: str
    text: str


def as_html_text(value: Any) -> Markup:
    """A value as an opening writes it, the way the corpus writes text (lab.corpus): `&`, `<`, `>` and `"`
    escaped, `'` as it is. Jinja2's own escaping writes `don't` as `don&#39;t`, which the model never reads in
    training and its tokenizer reads as six tokens after `don` where `'t` is one. `"` stays escaped, so a value is
    safe in a double-quoted attribute, and genui refuses an opening that puts one in a single-quoted attribute
    (genui.sites)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value).replace(GAP, ""), quote=False).replace('"', "&quot;"))


def _sandbox(site: Site, autoescape: bool) -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        loader=FileSystemLoader(site.prompts_dir),
        auto_reload=False,  # the templates as loaded, which the page-cache key hashes (genui serve --reload reloads)
        undefined=StrictUndefined,
        autoescape=autoescape,
        finalize=as_html_text if autoescape else None,
        keep_trailing_newline=True,
    )
    if autoescape:  # openings
        env.globals["gap"] = gap
        env.globals["asset"] = functools.partial(asset_url, site.name)  # {{ asset("logo.png") }}: genui.assets
    return env


def _calls_gap(env: ImmutableSandboxedEnvironment, source: str) -> bool:
    return any(node.name == "gap" for node in env.parse(source).find_all(nodes.Name))


def _pulled_in(env: ImmutableSandboxedEnvironment, source: str) -> Iterator[tuple[tuple[str, ...] | None, bool]]:
    """The templates a template's source includes, imports or extends: each as the names it may be (for a list,
    the first that exists), or None when the name is computed at render time; and whether it may be missing
    (``ignore missing``)."""
    pulling = (nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)
    for node in env.parse(source).find_all(pulling):
        assert isinstance(node, pulling)
        optional = isinstance(node, nodes.Include) and node.ignore_missing
        named = node.template
        values = [named.value] if isinstance(named, nodes.Const) else None
        if isinstance(named, nodes.Const) and isinstance(named.value, (list, tuple)):
            values = list(named.value)
        elif isinstance(named, (nodes.List, nodes.Tuple)):
            values = [item.value if isinstance(item, nodes.Const) else None for item in named.items]
        if values is None or not all(isinstance(value, str) for value in values):
            yield None, optional
        else:
            yield tuple(values), optional


class PromptRenderer:
    """Renders one site's prompt templates."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._env = _sandbox(site, autoescape=False)  # prompts: plain text for the model
        self._html = _sandbox(site, autoescape=True)  # openings: HTML for the page, so values are escaped
        self._versions: dict[Route, str] = {}
        problems = Problems()  # each route's templates on their own: every route's problems said in one run
        # (file, line, error) of a render that failed -> the error said, and the other routes that failed alike
        failed: dict[tuple[str, int | None, str], tuple[PromptError, list[str]]] = {}
        for route in site.routes:
            try:
                self._check_route(route)
            except PromptError as err:  # a template several routes read, failing alike: said once, for the first
                if (said := (err.file, err.line, repr(err.__cause__))) in failed:
                    failed[said][1].append(route.pattern)
                else:
                    failed[said] = (err, [])
                    problems.add(err)
            except SiteConfigError as err:
                problems.add(err)
        for first, alike in failed.values():  # named with the first: fixed one route a run, each said the next
            if alike:
                first.also_for(alike)
        problems.raise_found()

    def _check_route(self, route: Route) -> None:
        """Raise SiteConfigError for what is wrong with ``route``'s templates, tried with sample values."""
        self._versions[route] = self._version_of(route)  # which checks every template the route reads
        try:
            self._try(route)
        except PromptError as err:
            raise err.tried_for(route) from err.__cause__
        self._check_gaps_in_text(route)
        replies = route.reply_opening
        sources = self._sources(replies, self._html)[0].values() if replies is not None else ()
        if replies is not None and any(_calls_gap(self._html, source) for source in sources if source):
            raise SiteConfigError(
                self.site.prompts_dir / replies,
                "gap()",
                "a reply opening cannot have gaps: replies are written in place after the thread",
                "move the gap() into the route's opening, or write the text out",
            )

    def _check_gaps_in_text(self, route: Route) -> None:
        """SiteConfigError for an opening that puts a gap inside a tag (an attribute's value): the model's text there
        ends at the next tag, not at the quote, and would run the tag into the page's text."""
        if route.opening is None:
            return
        try:
            opening = self.opening(route, dict.fromkeys(route.params, SAMPLE_VALUES[0]), None, None, [])
        except PromptError:  # a failure of these values' own: the trial render said what it had to
            return
        if _GAP_IN_TAG.search(opening):
            raise SiteConfigError(
                self.site.prompts_dir / route.opening,
                "opening",
                "a gap() stands inside a tag (an attribute's value): a gap ends at a tag, not at a quote",
                "put the gap in an element's text, e.g. <dd>{{ gap() }}</dd>",
            )

    def _try(self, route: Route) -> None:
        """Render the route's templates with sample values (a first visit with no parent and no posts, and one with
        both), so that what would fail on every page (an undefined variable, a template that includes itself) is
        a config error at load, not a failed page later. A failure that may depend on the values (arithmetic,
        splitting a URL's text, a template the URL names) is left to the page that meets it (_whatever_the_values).
        One the first visit meets and the visit with a parent and a post does not (`{{ posts[0].user }}`) is the
        first visit's doing, whatever the values: every page has one."""
        params = {name: SAMPLE_VALUES[0] for name in route.params}
        query = {key: SAMPLE_VALUES[1] for key in route.query}
        first: tuple[Parent | None, list[Post]] = (None, [])
        later = (Parent("/Sample_parent", "Sample parent"), [Post("reader", "A sample post.")])
        for render in (self.render, self.opening, self.reply_opening):
            failed: list[PromptError | None] = []
            for parent, posts in (first, later):
                try:
                    render(route, params, query, parent, posts)
                    failed.append(None)
                except PromptError as err:
                    if _whatever_the_values(err.__cause__):
                        raise
                    failed.append(err)
            # a visit with no query at all: every key is "" (docs/sites.md); not where that address writes no page
            # (the site bar's or a form's route, nothing asked: Location.blank)
            if route.query and not route.form and route.bar_label is None:
                try:
                    render(route, params, dict.fromkeys(route.query, ""), *first)
                except PromptError as err:
                    if _whatever_the_values(err.__cause__):
                        raise
            if failed[0] is not None and failed[1] is not None and isinstance(failed[1].__cause__, _ANY_VALUES):
                # both visits fail: whatever the values too where other values, a number among them, fail the same
                # way at the same line (`{{ params.title + 1 }}`, `{{ 1 // 0 }}`: it loaded, and every page of the
                # route was a 500: a site developer's review); not where one passes (`{{ 10 / (params.n | int) }}`),
                # nor a lookup, an index or an include by a value, which the site's own values may pass
                said = (failed[1].file, failed[1].line, type(failed[1].__cause__))
                same = (failed[0].file, failed[0].line, type(failed[0].__cause__)) == said  # not the sample parent's
                if same and all(self._fails_so(render, route, value, later, said) for value in (OTHER_SAMPLE, "12")):
                    raise failed[1] from None
            if failed[0] is not None and failed[1] is None:
                # the first visit's doing, unless other values pass it (`params.thread.split("_")[1]` in a branch
                # only a first visit takes fails on "Sample" alone)
                others = {name: OTHER_SAMPLE for name in route.params}, {key: OTHER_SAMPLE for key in route.query}
                try:
                    render(route, *others, *first)
                except PromptError:
                    raise failed[0] from None

    @staticmethod
    def _fails_so(
        render: Callable[..., str],
        route: Route,
        value: str,
        visit: tuple[Parent | None, list[Post]],
        said: tuple[str, int | None, type],
    ) -> bool:
        """Whether rendering ``route`` with ``value`` in every parameter and query key fails as ``said`` (the file,
        the line and the kind of error)."""
        try:
            render(route, dict.fromkeys(route.params, value), dict.fromkeys(route.query, value), *visit)
        except PromptError as err:
            return (err.file, err.line, type(err.__cause__)) == said
        return False

    def _version_of(self, route: Route) -> str:
        """A hash of everything in the site's folder that shapes a page of ``route``: its prompt and opening
        templates with every template they pull in (every file in the prompts folder when a name is computed at
        render time), and the values of site.toml they are rendered with or written under (the title, the brief
        where the route reads it, the route's pattern, context and query keys, ``[model]``)."""
        site = self.site
        sources, computed = self._sources(route.template, self._env)
        for key, opening in (("opening", route.opening), ("reply_opening", route.reply_opening)):
            if opening is not None:
                more, also = self._sources(opening, self._html, key)
                sources, computed = sources | more, computed or also
        digest = hashlib.sha256()
        for name, source in sorted(sources.items()):
            digest.update(name.encode() + b"\0" + (b"\1" if source is None else source.encode()) + b"\0")
        if computed:  # it could be any file there: their bytes, unchecked, since most are never rendered
            for name in sorted(set(self._env.list_templates()) - set(sources)):
                try:
                    content = (site.prompts_dir / name).read_bytes()
                except OSError:  # a dangling link an editor leaves while a file is open, say
                    content = b"\2"
                digest.update(name.encode() + b"\0" + content + b"\0")
        settings = {
            "site": [site.title, site.brief if "brief" in route.context else ""],
            "route": [route.pattern, route.template, route.opening, route.reply_opening, route.context, route.query],
            "posts": route.posts,
            "model": astuple(site.model),
        }
        digest.update(json.dumps(settings, sort_keys=True).encode())
        return digest.hexdigest()[:16]

    def _sources(
        self, name: str, env: ImmutableSandboxedEnvironment, key: str = "template"
    ) -> tuple[dict[str, str | None], bool]:
        """``name`` and every template it includes, imports or extends, however deep, to its source (None for one
        that may be missing and is), each compiled (so Jinja2 holds it as it is now) or SiteConfigError raised, under
        ``key`` (the route's key that names ``name``) for ``name`` itself and `template` for the rest; and whether
        one of those names is computed at render time."""
        top = name
        found: dict[str, str | None] = {}
        waiting = [(name, name, False)]  # (a template, the template that names it, whether it may be missing)
        computed = False
        while waiting:
            name, named_by, optional = waiting.pop()
            if name in found and (found[name] is not None or optional):  # a required one is checked again
                continue
            source = found[name] = self._source(name, env, named_by, optional, key if name == top else "template")
            for names, may_miss in _pulled_in(env, source) if source is not None else ():
                if names is None:
                    computed = True
                elif len(names) > 1 and not may_miss and not any(self._exists(other, env) for other in names):
                    raise self._missing(", ".join(map(repr, names)), named_by=name)
                else:
                    waiting.extend((other, name, may_miss or len(names) > 1) for other in names)
        return found, computed

    def _source(
        self, name: str, env: ImmutableSandboxedEnvironment, named_by: str, optional: bool, key: str
    ) -> str | None:
        assert env.loader is not None  # _sandbox gives every environment the site's prompts folder
        try:
            source = env.loader.get_source(env, name)[0]
        except TemplateNotFound:
            if optional:
                return None
            raise self._missing(repr(name), named_by if named_by != name else None, key) from None
        except UnicodeDecodeError as err:  # Jinja2 reads templates as UTF-8
            file = self.site.prompts_dir / name.lstrip("/")
            raise SiteConfigError(file, key, f"not UTF-8 ({err})", "save the file as UTF-8") from None
        file = self.site.prompts_dir / name.lstrip("/")
        if source.startswith("\ufeff"):  # Jinja2 keeps it: every prompt would start with an invisible character
            raise SiteConfigError(file, key, "it starts with a byte order mark", "save it as UTF-8 without a BOM")
        if key == "template" and name == named_by and not source.strip():  # a route's own prompt, not a part of one
            raise SiteConfigError(file, key, "it is empty", "write the prompt the model reads for the route's pages")
        self._check(name, env, key)
        return source

    @staticmethod
    def _exists(name: str, env: ImmutableSandboxedEnvironment) -> bool:
        try:
            env.get_template(name)
        except TemplateNotFound:
            return False
        except (TemplateError, UnicodeDecodeError):
            return True  # there, and _source says what is wrong with it
        return True

    def _missing(self, names: str, named_by: str | None, key: str = "template") -> SiteConfigError:
        prompts = self.site.prompts_dir
        if named_by is None:
            return SiteConfigError(prompts / names.strip("'"), key, "no such file", "add it, or fix the name")
        return SiteConfigError(
            prompts / named_by.lstrip("/"),
            key,
            f"it pulls in {names}, which is not a file in {prompts}",
            "add the file there, or correct the name (or include it with 'ignore missing')",
        )

    def _check(self, name: str, env: ImmutableSandboxedEnvironment, key: str) -> None:
        file = self.site.prompts_dir / name.lstrip("/")
        try:
            env.get_template(name)
        except TemplateSyntaxError as err:  # an unknown filter or test too (TemplateAssertionError)
            unknown = isinstance(err, TemplateAssertionError) and str(err.message).startswith("No ")
            fix = "use one of Jinja2's built-in filters and tests (a typo?)" if unknown else "fix the template syntax"
            problem = f"Jinja2 error at line {err.lineno}: {err.message}"
            raise SiteConfigError(file, key, problem, fix) from None
        except TemplateError as err:
            raise SiteConfigError(file, key, f"Jinja2 error: {err}", "fix the template syntax") from None
        except UnicodeDecodeError as err:  # Jinja2 reads templates as UTF-8
            raise SiteConfigError(file, key, f"not UTF-8 ({err})", "save the file as UTF-8") from None
        except (RecursionError, SyntaxError) as err:  # Python cannot compile what Jinja2 made of it
            problem = f"nested too deeply to compile ({type(err).__name__})"
            raise SiteConfigError(file, key, problem, "nest fewer blocks inside each other") from None
        except OSError as err:
            raise SiteConfigError(file, key, f"cannot read it ({err.strerror or err})", "make it readable") from None

    def written_in(self, opening: str, text: str) -> str:
        """The file among ``opening`` and those it pulls in whose source holds ``text`` (an opening's link, say),
        ``opening`` itself first; ``opening`` where none does (the text is made at render time)."""
        sources = self._sources(opening, self._html)[0]
        holding = [name for name, source in sources.items() if source is not None and text in source]
        return opening if opening in holding or not holding else holding[0]

    def left_out(self, route: Route) -> list[str]:
        """What the route's templates (its prompt, its openings and every file they pull in) read that its
        ``context`` leaves out, so that it is always empty: "brief" (``site.brief`` is ""), "parent" (None), "posts"
        ([]). Not an error: a template shared by routes of other contexts may read one under an ``{% if %}``."""
        return sorted(self._read(route) - set(route.context))

    def posts_unread(self, route: Route) -> bool:
        """Whether readers may post on the route's pages (``posts = true``) while none of its templates reads
        ``posts``: their posts are kept and shown, but never reach the model's prompt (a hackathon team's review)."""
        return route.posts and "posts" not in self._read(route)

    def _read(self, route: Route) -> set[str]:
        """Which of "brief", "parent" and "posts" the route's templates and every file they pull in read."""
        read: set[str] = set()
        for name, env in ((route.template, self._env), (route.opening, self._html), (route.reply_opening, self._html)):
            if name is None:
                continue
            for source in self._sources(name, env)[0].values():
                if source is None:
                    continue
                tree = env.parse(source)
                read |= {node.name for node in tree.find_all(nodes.Name) if node.name in ("parent", "posts")}
                for node in tree.find_all(nodes.Getattr):
                    if node.attr == "brief" and isinstance(node.node, nodes.Name) and node.node.name == "site":
                        read.add("brief")
        return read

    def version(self, route: Route) -> str:
        """A short hash of what shapes the route's pages (templates and settings): part of every page-cache key."""
        return self._versions[route]

    def render(
        self,
        route: Route,
        params: dict[str, str],
        query: dict[str, str] | None = None,
        parent: Parent | None = None,
        posts: list[Post] | None = None,
    ) -> str:
        """The route's prompt. Raises PromptError when the template fails."""
        variables = self._variables(route, params, query, parent, posts, prompt=True)
        return self._rendered(self._env, route.template, variables)

    def opening(
        self,
        route: Route,
        params: dict[str, str],
        query: dict[str, str] | None = None,
        parent: Parent | None = None,
        posts: list[Post] | None = None,
    ) -> str:
        """The HTML the route's pages start with ("" if it has none); the template sees what the prompt sees."""
        return self._html_of(route.opening, route, params, query, parent, posts)

    def reply_opening(
        self,
        route: Route,
        params: dict[str, str],
        query: dict[str, str] | None = None,
        parent: Parent | None = None,
        posts: list[Post] | None = None,
    ) -> str:
        """The HTML a page's new replies start with ("" if the route has none)."""
        return self._html_of(route.reply_opening, route, params, query, parent, posts)

    def _html_of(
        self,
        name: str | None,
        route: Route,
        params: dict[str, str],
        query: dict[str, str] | None,
        parent: Parent | None,
        posts: list[Post] | None,
    ) -> str:
        if name is None:
            return ""
        return inside_tag_unbroken(
            self._rendered(self._html, name, self._variables(route, params, query, parent, posts))
        )

    def _rendered(self, env: ImmutableSandboxedEnvironment, name: str, variables: dict[str, Any]) -> str:
        try:
            return env.get_template(name).render(variables)
        except Exception as err:  # the template's own doing: the sandbox runs nothing else
            raise _failure(self.site, name, err) from err

    def _variables(
        self,
        route: Route,
        params: dict[str, str],
        query: dict[str, str] | None,
        parent: Parent | None,
        posts: list[Post] | None,
        prompt: bool = False,
    ) -> dict[str, Any]:
        """The variables a template is rendered with; ``prompt``: a prompt's (plain text), not an opening's (HTML,
        which escapes every value itself)."""

        # Text from a URL, a page or a post never holds the gap mark, whatever filter a template puts it through
        # (as_html_text drops it too, but passes a value `| e` or `| safe` has made Markup as it is).
        def plain(text: str) -> str:
            return text.replace(GAP, "")

        def tagless(text: str) -> str:
            # A reader's text is data in a prompt whose parts are tags (the forum's <reply user="…">): written as it
            # was, `ok</reply><reply user="admin">…` read as a second post by another name (a forum user's review).
            # An opening escapes it whole as HTML already (and `&lt;` escaped again read as `&lt;` on the page).
            return text.replace("<", "&lt;").replace(">", "&gt;") if prompt else text

        parent = parent if "parent" in route.context else None
        variables: dict[str, Any] = {
            "site": {"name": self.site.name, "title": self.site.title, "brief": self.site.brief},
            "params": {key: plain(value) for key, value in params.items()},
            "query": {key: plain((query or {}).get(key, "")) for key in route.query},
            "parent": None if parent is None else replace(parent, title=plain(parent.title)),
            "posts": [Post(plain(p.user), tagless(plain(p.text))) for p in posts or []]
            if "posts" in route.context
            else [],
        }
        if "brief" not in route.context:
            variables["site"]["brief"] = ""
        return variables
