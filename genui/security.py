"""The browser-side half of genui's defence: response headers and htmx's configuration.

sanitize.py is the first layer (nothing executable leaves the server); this module is the second, for the day the
first one misses: the page may only run genui's own scripts and styles from genui's own origin, and htmx is told not
to evaluate anything it finds in markup. docs/security.md explains each choice.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CONTENT_SECURITY_POLICY", "HTMX_CONFIG", "htmx_config_meta", "security_headers"]

# `'self'` in connect-src also covers ws:/wss: to the same host and port (CSP Level 3; checked in Chromium by
# tests/test_xss_browser.py), so genui's WebSocket needs no extra source. No 'unsafe-inline' anywhere: every script
# and stylesheet is a file under /static, and htmx's own indicator style is switched off in HTMX_CONFIG.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "font-src 'self'",
        "connect-src 'self'",
        "media-src 'none'",
        "object-src 'none'",
        "frame-src 'none'",
        "worker-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

# Powerful features a generated page has no use for; denied for the page and anything it might embed.
_PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer", "camera", "display-capture", "geolocation", "gyroscope", "magnetometer", "microphone",
        "payment", "usb",
    )
)  # fmt: skip

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # Same-origin requests keep the Referer genui may use for context; other origins learn nothing.
    "Referrer-Policy": "same-origin",
    # For browsers that predate frame-ancestors.
    "X-Frame-Options": "DENY",
    "Permissions-Policy": _PERMISSIONS_POLICY,
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def security_headers() -> dict[str, str]:
    """The headers every genui response carries (a fresh dict: callers may add to it)."""
    return dict(_HEADERS)


# htmx 2 reads this from <meta name="htmx-config" content="..."> once, at load.
HTMX_CONFIG: dict[str, Any] = {
    # Requests only to the page's own origin, whatever a URL in the page says.
    "selfRequestsOnly": True,
    # No eval: turns off hx-on*, `js:` in hx-vals/hx-headers and `[...]` trigger filters.
    "allowEval": False,
    # Never run a <script> that arrives in swapped content.
    "allowScriptTags": False,
    # The indicator style is an inline <style>, which the CSP refuses; genui.css styles .htmx-indicator instead.
    "includeIndicatorStyles": False,
    # Keep no copies of generated pages in localStorage: they would outlive the visit and be readable by anything
    # on the origin. On back/forward the page is loaded again, which genui's page cache answers.
    "historyCacheSize": 0,
    "refreshOnHistoryMiss": True,
    # Only the top-level elements of a response may be swapped out of band (the shape of genui's stream frames);
    # an hx-swap-oob deeper inside generated markup, were one ever to survive sanitising, would be ignored.
    "allowNestedOobSwaps": False,
    "withCredentials": False,
}


def htmx_config_meta() -> str:
    """HTMX_CONFIG as the `content` of the htmx-config meta tag (JSON; escape it as an attribute when rendering)."""
    return json.dumps(HTMX_CONFIG, separators=(",", ":"))
