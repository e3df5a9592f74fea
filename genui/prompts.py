"""Prompt templates: Jinja2 in its sandbox. URL text is data passed to a template, never template code."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from jinja2 import FileSystemLoader, StrictUndefined, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from genui.sites import Route, Site, SiteConfigError


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


class PromptRenderer:
    """Renders one site's prompt templates."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._env = ImmutableSandboxedEnvironment(
            loader=FileSystemLoader(site.prompts_dir),
            undefined=StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
        )
        self._versions: dict[str, str] = {}
        for route in site.routes:
            try:
                self._env.get_template(route.template)
            except TemplateError as err:
                raise SiteConfigError(
                    site.prompts_dir / route.template, "template", f"Jinja2 error: {err}", "fix the template syntax"
                ) from None
            except UnicodeDecodeError as err:  # Jinja2 reads templates as UTF-8
                raise SiteConfigError(
                    site.prompts_dir / route.template, "template", f"not UTF-8 ({err})", "save the file as UTF-8"
                ) from None
            source = (site.prompts_dir / route.template).read_bytes()
            self._versions[route.template] = hashlib.sha256(source).hexdigest()[:16]

    def version(self, route: Route) -> str:
        """A short hash of the template source: part of every page-cache key."""
        return self._versions[route.template]

    def render(
        self,
        route: Route,
        params: dict[str, str],
        query: dict[str, str] | None = None,
        parent: Parent | None = None,
        posts: list[Post] | None = None,
    ) -> str:
        variables: dict[str, Any] = {
            "site": {"name": self.site.name, "title": self.site.title, "brief": self.site.brief},
            "params": dict(params),
            "query": {key: (query or {}).get(key, "") for key in route.query},
            "parent": parent if "parent" in route.context else None,
            "posts": list(posts or []) if "posts" in route.context else [],
        }
        if "brief" not in route.context:
            variables["site"]["brief"] = ""
        return self._env.get_template(route.template).render(variables)
