"""The words of genui's own parts of a site's pages (the toolbar, the skip link, the progress line, the readers' form's
notices, what a screen reader is told as a page lands), in English unless a site's ``[words]`` says otherwise.

A site in another language says them in its own (``site.toml``: ``[words]``, docs/sites.md); each is one line of text,
and a ``{name}`` in it is a value genui fills in (``{n}``, ``{title}``), which a site's words may leave out but not add.
Words with an ``{n}`` may be a table of the language's plural forms instead (``{ one = "…", few = "…", other = "…" }``,
Unicode CLDR's categories), of which the one for ``n`` is said, as Babel's plural rules for the site's language have it.
What the server says of a page it cannot give now (the model loading or busy, a page still being written, no page or
version at an address, too many requests: docs/sites.md lists them) is among them; the rest of what it says of a
failure (a malformed request's reason, a refused post's reason) stays English, marked so on a site in another
language (``Words.english``)."""

from __future__ import annotations

import functools
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from babel import Locale, UnknownLocaleError
from markupsafe import Markup, escape
from starlette.exceptions import HTTPException

WORDS: dict[str, str] = {
    # the page's frame
    "skip": "Skip to the page",
    "all_sites": "all sites",
    "footer": "Every page here is written on the fly by {model}.",
    "copy_footer": "A static copy of pages written by {model} with genui.",  # genui cache export's pages
    "not_in_copy": "not in this copy",  # the title of a link of an exported page to a page it does not hold
    "copy_pages": "Every page in this copy",  # an exported site's list of its pages, and its footer's link to it
    "ways_on": "Ways on from this page",  # a [[navigation]] section with no heading, as screen readers name it
    "one_reply": "1 reply",  # beside a thread a [[navigation]] section lists: its readers' posts
    "replies": "{n} replies",
    # the toolbar
    "page_tools": "Page tools",
    "version": "version",
    "version_link": "Version {n}",
    "regenerate": "Regenerate",
    "regenerate_hint": "Write this page again with a new seed; earlier versions stay",
    "restore": "Make this the newest",  # on an older version: stored again as the newest, the one visitors see
    "restore_hint": "Store this version again as the newest, the one the page's address shows; the others stay",
    "variations": "{n} variations",
    "variations_hint": "Write {n} candidates side by side and keep one as the next version",
    "section": "Section",
    "how": "How? (optional)",
    "how_label": "How to rewrite it (optional)",
    "rewrite": "Rewrite",
    "rewrite_hint": "Write this section again; the rest of the page stays as it is",
    # a page being written
    "placeholder": "Loading…",  # until genui.js opens its stream (without scripts, until the page is written)
    "waiting": "Waiting for the model…",  # its stream open, before its first frame
    # and while other pages are written or wait before it (the engine's queue: genui serve --queue)
    "waiting_behind_one": "Waiting for the model: one page is ahead of this one.",
    "waiting_behind": "Waiting for the model: {n} pages are ahead of this one.",
    "stop": "Stop",  # a button beside the progress line (and Escape): no more of the page is written for this tab
    "stop_hint": "Stop writing this page (Escape)",
    "stopped": "Stopped.",  # the progress line, once stopped; a link to the page follows
    "open_again": "Open the page again",
    # a page may end before its last canvas: "of at most" (a page that ended at 3 read "canvas 3 of 6")
    "progress": "Writing: part {canvas} of at most {canvases}, step {step}",
    "progress_open": "Writing: part {canvas}, step {step}",  # an engine that does not say how many canvases
    "writing_variations_of": "Writing {n} variations of {page}…",
    "variations_title": "{n} variations of {page}",  # the browser's tab, on a set of variations
    "variations_step": " part {canvas}, step {step}",
    # after it, before their first step, while other pages are written or wait before them (the engine's queue)
    "variations_behind_one": " (waiting for the model: one page is ahead of them)",
    "variations_behind": " (waiting for the model: {n} pages are ahead of them)",
    "variations_of": "{n} variations of {page}: keep one as its next version.",
    # below that, for a thread whose readers' posts are answered in place: the candidates are the thread before them
    "variations_conversation": "The readers' posts and the replies to them follow the one kept, as they are now.",
    "keep": "Keep variation {n}",
    "variation_label": "Variation {n}",  # a candidate's region, as screen readers name it
    # the readers' form of a page with posts
    "no_replies": "No replies from readers yet.",
    "replies_above": "Readers' replies are in the thread above.",
    "replies_later": "genui is loading its model: replies to new posts are written once it is ready.",
    "posts_later": "Posts made after this version, with the replies to them, are in the newest one.",
    "replies_next": "The newest posts are answered next: this page asks again in a moment.",
    "replies_later_link": "Open the thread again in a minute to see them.",  # without scripts, which would
    # at the foot of a thread's screen, where readers posted to it since it was shown
    "new_posts_one": "A reader posted to this thread since it was shown.",
    "new_posts": "{n} posts were made to this thread since it was shown.",
    "show_new_posts": "Show the thread as it is now",
    "new_posts_typing": "Posting your reply shows the thread as it is now.",  # in place of the link, while typing
    "quote": "Quote the selection",  # a reply form's button: the words selected in the thread, as a quote
    "quote_hint": "Select words in the thread, then quote them in your reply",
    # said by static/genui.js: to screen readers as a page lands, and below a form whose request failed (but
    # not_posted, which the server writes above the reply form, and the script says as it is written)
    "loaded": "Loaded: {title}",
    "loaded_version": "Loaded: {title}, version {n}",
    "writing_page": "Writing: {title}",
    "reply_posted": "Your reply is posted; the replies to it are being written.",
    "replies_written": "The replies to your post are written, below it.",
    "section_rewritten": "Rewritten: section {n} of {title}",
    "writing_variations": "Writing {n} variations",
    "variations_written": "{n} variations written: keep one of them",
    "not_posted": "Your reply was not posted: {reason}",  # above the reply form
    "connection_lost": "Connection lost: connecting again…",
    "connection_closed": "Connection closed: reload the page to see it written.",
    "refused": "That was refused ({status}). Try again.",
    "unreachable": "This could not reach the server. Check the connection, then send it again.",
    "offline": "You are offline.",  # at the foot of the screen, while the browser says it is
    "offline_link": "You are offline: the page asked for opens once the connection is back.",
    "offline_writing": "You are offline: the page carries on once the connection is back.",  # a page being written
    "back_online": "You are back online: send it again.",  # a form that could not be sent offline
    "unanswered": "The server has not answered yet: the connection may be slow.",  # a link or a form, after 6 s
    # what the server says of a page it cannot give now (a 503 or a 404, its error page or a stream's end)
    "back_to": "Back to {title}",
    "try_again": "Try again",
    "loading_heading": "Loading the model",
    "loading": "genui is loading its model. This page tries again in {seconds} s.",
    "loading_later": "genui is loading its model. Try again in {seconds} s.",  # a form posted: not sent again
    # its weights could not be fetched (no network), and genui tries again: its cached pages are served meanwhile
    "unreached": "genui cannot fetch its model yet, and tries again. This page tries again in {seconds} s.",
    "unreached_later": "genui cannot fetch its model yet, and tries again. Try again in {seconds} s.",
    "busy_heading": "Busy",
    "busy": "The model is busy. This page tries again in {seconds} s.",
    "busy_later": "The model is busy. Try again in {seconds} s.",  # a form posted: not sent again
    "writing_heading": "Still writing",
    "still_writing": "The page is still being written. This page asks again in {seconds} s.",
    "not_found_heading": "Not found",
    "no_page": "No page lives at this address.",
    "no_version_heading": "No such version",
    "no_version": "There is no version {n} of this page.",  # ?v=N past its newest
    "not_allowed_heading": "Method not allowed",  # a 405: a PUT or DELETE of a page, a reply to a page of no thread
    "only_read": "This page is only read.",
    "only_read_replied": "This page is only read and replied to.",
    "takes_no_replies": "This page takes no replies.",
    "too_many_heading": "Too many requests",  # a 429: one client's runs under way, or its posts in a minute
    # (said of the address, which a class behind one NAT shares: "You have 3 pages" was false for the 4th student)
    "too_many_runs_one": "A page is being written for your address (or network) already. This page tries again in"
    " {seconds} s.",
    "too_many_runs": "{n} pages are being written for your address (or network) already. This page tries again in"
    " {seconds} s.",
    "too_many_runs_one_later": "A page is being written for your address (or network) already. Try again in {seconds}"
    " s.",  # a form posted: not sent again
    "too_many_runs_later": "{n} pages are being written for your address (or network) already. Try again in {seconds}"
    " s.",
    "too_many_posts_one": (
        "A reply was posted from your address (or network) in the last minute, the most it may post. Try again in"
        " {seconds} s."
    ),
    "too_many_posts": (
        "{n} replies were posted from your address (or network) in the last minute, the most it may post. Try again"
        " in {seconds} s."
    ),
    "restarting_heading": "Restarting",
    "restarting": "genui is stopping, most likely to start again. This page tries again in {seconds} s.",
    "restarting_later": "genui is stopping, most likely to start again. Try again in a moment.",
    "reply_not_posted_heading": "Reply not posted",  # a reply refused on a thread not written yet: an error page
    # a reader's name as a reply takes it: the name field's hint, and the reason a name is refused
    "user_rule": "a name is 1 to {n} letters or digits, of any script, - and _, with no spaces (ada_l, not Ada L.)",
    "reply_saved_heading": "Reply saved",  # a reply sent again, stored the first time, that cannot be answered now
    "reply_saved": "Your reply is saved, and is answered once the thread can be written ({why}).",  # why: a heading
    "reply_waits": "Your reply is saved, and waits for the thread to be written.",
    # an address of a route of the site bar's with nothing in its box (/search, /search?q=%20): the box, not a page
    "blank": "Nothing was asked yet: type it in the {field} box above.",
    "blank_form": "Nothing was asked yet: fill in the form above.",  # the same, of a route with a form (/plan)
}
# The words static/genui.js says, handed to it on the page's <body> (data-genui-words).
SCRIPT_WORDS = (
    "loaded",
    "loaded_version",
    "writing_page",
    "reply_posted",
    "replies_written",
    "section_rewritten",
    "writing_variations",
    "variations_written",
    "connection_lost",
    "connection_closed",
    "refused",
    "unreachable",
    "offline",
    "offline_link",
    "offline_writing",
    "back_online",
    "unanswered",
    "waiting",
    "stopped",
    "open_again",
)
MOST = 200  # characters of one of a site's words
PLURAL_FORMS = ("zero", "one", "two", "few", "many", "other")  # Unicode CLDR's plural categories, as Babel names them
# words genui says for a count of 1 in place of the count's own (no {n}: "1 reply", "a page being written"), where the
# site says them, or says the count's words as one line; a site whose count is a table of plural forms says 1 by it
SINGULAR = {
    "one_reply": "replies",
    "waiting_behind_one": "waiting_behind",
    "variations_behind_one": "variations_behind",
    "too_many_runs_one": "too_many_runs",
    "too_many_runs_one_later": "too_many_runs_later",
    "too_many_posts_one": "too_many_posts",
    "new_posts_one": "new_posts",
}
Forms = tuple[tuple[str, str], ...]  # a site's plural forms of one of its words: (category, text), as Site keeps them


@functools.lru_cache(maxsize=64)
def plural_rule(lang: str) -> Callable[[float], str]:
    """The plural category of a count in ``lang`` (a BCP 47 tag): CLDR's rules by Babel, for the tag, else its
    language alone (``de-CH-1996``: German's), else English's."""
    for tag in (lang, lang.split("-")[0]):
        try:
            return Locale.parse(tag, sep="-").plural_form
        except (ValueError, TypeError, UnknownLocaleError):
            continue
    return lambda n: "one" if n == 1 else "other"


def _in(lang: str, text: str) -> Markup:
    """``text`` (escaped unless Markup) marked as written in ``lang``."""
    return Markup('<span lang="{}">{}</span>').format(lang, text)


def fields(text: str) -> list[str]:
    """The ``{name}`` fields of ``text``, in order, each as written between its braces (``n``; ``n:>3`` or ``n!r``
    with a format spec or a conversion); ValueError for a brace that opens none ("{" alone)."""
    written = []
    for _, name, spec, conversion in string.Formatter().parse(text):
        if name is not None:
            written.append(name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else ""))
    return written


def problem(key: str, text: object) -> str | None:
    """What is wrong with a site's words for ``key`` (a line, or a table of plural forms), None if nothing."""
    if key not in WORDS:
        return f"{key!r} is none of genui's words"
    if isinstance(text, dict):
        if "n" not in fields(WORDS[key]):
            return f"{key}: expected one line of text (a table of plural forms is for words with a count, {{n}})"
        if not all(isinstance(form, str) for form in text.values()):
            return f"{key}: expected each plural form as one line of text"
        unknown = [form for form in text if form not in PLURAL_FORMS]
        if unknown or "other" not in text:
            said = f"{unknown[0]!r} is no plural form" if unknown else "it has no 'other' form"
            return f"{key}: {said}; its forms are CLDR's: {', '.join(PLURAL_FORMS)}, with 'other' at least"
        return next((wrong for form in text.values() if (wrong := problem(key, form)) is not None), None)
    if not isinstance(text, str) or not text.strip() or len(text) > MOST or "\n" in text:
        return f"{key}: expected one line of text ({MOST} characters at most)"
    try:
        named = fields(text)
    except ValueError as exc:
        return f"{key}: {exc} (write {{{{ and }}}} for a brace)"
    known = fields(WORDS[key])
    extra = [name for name in named if name not in known]  # a spec or a conversion too: `{n:>3}` is not `{n}`
    if extra:
        said = ", ".join("{" + name + "}" for name in known) or "none"
        return f"{key}: {{{extra[0]}}} is not one of its values ({said}), each written as it is, with no format"
    return None


@dataclass(frozen=True, slots=True)
class Words:
    """A site's words: its own where it has them, else genui's English."""

    own: Mapping[str, str | Forms] = field(default_factory=dict)
    lang: str = "en"  # the site's language (site.toml's lang)

    @property
    def foreign(self) -> bool:
        """Whether the site is in another language than genui's English (its English is then marked so)."""
        return self.lang.split("-")[0].lower() != "en"

    def says(self, key: str) -> bool:
        """Whether the site has words of its own for ``key`` (for a count of 1: its plural forms of the count's)."""
        return key in self.own or isinstance(self.own.get(SINGULAR.get(key, "")), tuple)

    def say(self, key: str, **values: object) -> Markup:
        """The words for ``key`` as HTML, ``values`` filled in (escaped unless already Markup). genui's English on a
        site in another language, which has no words of its own for ``key``, is marked as English (``lang="en"``),
        or a screen reader reads it in the site's voice; in an attribute, ``|striptags`` leaves the text."""
        if self.says(key) or not self.foreign:
            line, values = self._line(key, values)
            return Markup(escape(line)).format(**values)
        # the values filled in (a page's title, its link) are the site's, in its own language
        own = {name: _in(self.lang, value) if isinstance(value, str) else value for name, value in values.items()}
        return _in("en", Markup(escape(WORDS[key])).format(**own))

    def english(self, text: str) -> Markup:
        """genui's English that no site's words say (a malformed request's reason), as HTML: marked as English on a
        site in another language, as ``say`` marks the words a site left out."""
        return _in("en", text) if self.foreign else Markup(escape(text))

    def text(self, key: str, **values: object) -> str:
        """The words for ``key`` as plain text, ``values`` filled in."""
        line, values = self._line(key, values)
        return line.format(**values)

    def for_script(self) -> dict[str, str | dict[str, str]]:
        """The words static/genui.js says, as text (a word's plural forms as a table): it fills in their values and
        picks a form itself."""
        return {
            key: (dict(said) if isinstance(said := self.own.get(key, WORDS[key]), tuple) else said)
            for key in SCRIPT_WORDS
        }

    def _line(self, key: str, values: dict[str, object]) -> tuple[str, dict[str, object]]:
        """The site's line for ``key`` (the plural form its count takes, where it has forms), else genui's, and the
        values it is filled in with."""
        said = self.own.get(key)
        if said is None and isinstance(self.own.get(SINGULAR.get(key, "")), tuple):
            said, values = self.own[SINGULAR[key]], {**values, "n": 1}  # 1 said by the count's forms ("1 ответ")
        if isinstance(said, tuple):
            forms = dict(said)
            count = values.get("n")
            form = (
                plural_rule(self.lang)(count) if isinstance(count, int | float) and not isinstance(count, bool) else ""
            )
            return forms.get(form, forms["other"]), values
        return (WORDS[key] if said is None else said), values


class Refusal(HTTPException):
    """An HTTP refusal said in genui's words (``heading`` and ``message``, ``values`` filled in), so that a site says
    it in its own: its detail is the English. ``later``: the message where the request was a form posted, which is
    not sent again by itself (a page asked for asks again after its Retry-After)."""

    def __init__(
        self,
        status_code: int,
        heading: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        later: str | None = None,
        **values: object,
    ) -> None:
        super().__init__(status_code, WORDS[message].format(**values), dict(headers or {}))
        self.words = (heading, message, values)
        self.later = later
