// genui's page glue. The CSP allows no inline script, so the little the page needs beyond htmx lives here.
(function () {
  "use strict";

  // What it says, in the site's words (its site.toml's [words], genui's English otherwise: genui/words.py), with
  // their {name} values filled in.
  var WORDS = {};
  try {
    WORDS = JSON.parse(document.body.dataset.genuiWords || "{}");
  } catch (error) {
    WORDS = {};
  }

  // A count's words may be its language's plural forms (genui/words.py): the form for values.n, by the browser's
  // own CLDR rules for the page's language, as the server picks it by Babel's.
  function form(forms, n) {
    var category = "other";
    var lang = document.documentElement.lang || "en";
    try {
      // a tag the browser does not know takes English's rules, as on the server (Intl would take the browser's own)
      lang = Intl.PluralRules.supportedLocalesOf([lang]).length ? lang : "en";
      category = new Intl.PluralRules(lang).select(Number(n));
    } catch (error) {
      category = Number(n) === 1 ? "one" : "other";
    }
    return forms[category] || forms.other;
  }

  function say(key, values, fallback) {
    var text = WORDS[key] || fallback;
    if (typeof text === "object") {
      text = form(text, values && values.n);
    }
    return text.replace(/\{\{|\}\}|\{(\w+)\}/g, function (whole, name) {
      if (!name) {
        return whole.charAt(0); // {{ and }} are a brace, as in Python's str.format
      }
      return values && Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole;
    });
  }

  // navigator.onLine says whether this device has a network, not whether the server answers: genui serve on the
  // visitor's own laptop answers with its wifi off (a train), the browser saying "offline" all the while, and every
  // link, Back and Forward were held "until the connection is back". Offline here is the browser saying so and the
  // server not having answered since (the page itself was just served): where the browser goes offline, the server
  // is asked (its health URL) before the visitor is told.
  var reached = true;
  var HEALTH = ((document.currentScript && document.currentScript.src) || "").replace(/static\/genui\.js(\?.*)?$/, "health");

  function offlineNow() {
    return navigator.onLine === false && !reached;
  }

  function probe(then) {
    // a network that takes connections and never answers (a train's wifi, half there) ends each probe in 3 s: hung
    // ones, one every 4 s, would take the browser's few connections to the server from the visitor's own requests
    var ended = window.AbortController ? new AbortController() : null;
    if (ended) {
      window.setTimeout(function () {
        ended.abort();
      }, 3000);
    }
    window.fetch(HEALTH, { cache: "no-store", signal: ended ? ended.signal : undefined }).then(
      function () {
        reached = true; // any answer, a 503 while the model loads too
        then(true);
      },
      function () {
        then(false);
      }
    );
  }

  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.xhr && event.detail.xhr.status > 0) {
      reached = true;
      if (polling || document.getElementById("genui-offline")) {
        backOnline(); // the server answers: whatever the browser says, this is not offline
      }
    }
  });

  // A page's stream says so when the visitor leaves it (1000): the ws extension closes its socket with no code,
  // which the server cannot tell from a connection that broke (uvicorn reports a drop as 1005, no code given, too),
  // so a page whose connection dropped for a second was written again from its first step (a reader on a flaky
  // network). A broken connection is tried again within 4 s: the extension's waits grew to a minute while offline.
  if (window.htmx) {
    htmx.createWebSocket = function (url) {
      var socket = new WebSocket(url, []);
      socket.binaryType = htmx.config.wsBinaryType;
      var close = socket.close;
      socket.close = function (code, reason) {
        return code === undefined ? close.call(socket, 1000) : close.call(socket, code, reason);
      };
      return socket;
    };
    htmx.config.wsReconnectDelay = function (retries) {
      return Math.min(4000, 500 * Math.pow(2, retries)) * (0.5 + Math.random() / 2);
    };
  }

  // Error pages (a 404, a rejected reply, a busy model, genui's own 500, a proxy's 502) are pages too: every error
  // answered in HTML is shown where the page would have gone. htmx alone swaps none of them.
  // A page control's form (Regenerate, Rewrite, 3 variations) refused (a 409 while another version is written, a 503
  // while the model loads) says why below the toolbar instead: the page stays, and so does what was typed.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr.status >= 400 && (xhr.getResponseHeader("Content-Type") || "").indexOf("text/html") === 0) {
      var config = event.detail.requestConfig;
      var elt = config && config.elt ? config.elt : null; // the element that sent it (the event's is the target)
      var form = elt && elt.closest ? elt.closest("form") : null;
      // a Keep refused (a 409 while another version is written) says so by its candidate: the set stays on screen
      var holder = form ? form.closest("#genui-toolbar") || form.closest(".genui-candidate") : null;
      if (holder) {
        var answer = new DOMParser().parseFromString(xhr.responseText, "text/html");
        var why = answer.querySelector("#genui-content p");
        said(holder, why ? why.textContent : say("refused", { status: xhr.status }, "That was refused ({status}). Try again."));
        event.detail.shouldSwap = false;
        return;
      }
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // Two clicks in a row on a slow connection: the page clicked last is the one shown, whichever answer comes last.
  // (htmx's hx-sync would abort the first request, which htmx reports as an error.)
  var latest = null;
  var forMain = new WeakSet(); // the requests of pages for #genui-main: of those, only the latest is waited for
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.target && event.detail.target.id === "genui-main") {
      latest = event.detail.xhr;
      forMain.add(latest);
      unanswered(); // an earlier click's request unanswered is not waited for any more
    }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "genui-main" && latest && event.detail.xhr !== latest) {
      event.detail.shouldSwap = false; // an earlier click's page: the server keeps it, this tab shows the later one
    }
  });

  function said(holder, text) {
    var line = holder.querySelector(".genui-send-error") || document.createElement("p");
    line.className = "genui-form-error genui-send-error";
    line.setAttribute("role", "alert");
    line.textContent = text;
    holder.appendChild(line);
  }

  // No answer at all (the network down, the server gone): a link is opened the browser's own way, which says why
  // (and retries, and works again once the server is back); a form says so above itself, keeping what was typed.
  document.addEventListener("htmx:sendError", function (event) {
    var config = event.detail.requestConfig || {};
    reached = false;
    if (latest && event.detail.xhr && event.detail.xhr !== latest) {
      return; // an earlier click's: the later one is the page the visitor wants
    }
    var path = event.detail.pathInfo && event.detail.pathInfo.finalRequestPath; // a search form's query included
    if (config.verb === "get" && (path || config.path)) {
      if (offlineNow()) {
        offline(path || config.path); // the browser's own page would be its "no internet", the page read gone
        return;
      }
      window.location.assign(path || config.path);
      return;
    }
    var form = event.detail.elt && event.detail.elt.closest ? event.detail.elt.closest("form") : null;
    if (form) {
      var toolbar = form.closest("#genui-toolbar"); // said on a line of its own below the toolbar's row
      var holder = toolbar || form;
      var said = holder.querySelector(".genui-send-error") || document.createElement("p");
      said.className = "genui-form-error genui-send-error";
      said.setAttribute("role", "alert");
      said.textContent = say("unreachable", {}, "This could not reach the server. Check the connection, then send it again.");
      holder.insertBefore(said, toolbar ? null : form.firstChild);
    }
  });

  // A link opened with a modifier (Ctrl, Cmd, Shift, Alt) goes to a new tab or window, as anywhere else: htmx would
  // load it in place. Caught before htmx's own listener on the link sees the click.
  document.addEventListener(
    "click",
    function (event) {
      if (!(event.ctrlKey || event.metaKey || event.shiftKey || event.altKey)) {
        return;
      }
      var link = event.target && event.target.closest ? event.target.closest("a[hx-get][href]") : null;
      if (link) {
        event.stopPropagation();
      }
    },
    true
  );

  // A page asked for too soon (a 503 with Retry-After: the model loading or busy) asks again by itself: after
  // data-genui-retry seconds it goes to data-genui-retry-url. htmx drops the <head> of a page it swaps in, and with
  // it any refresh there; and a click elsewhere meanwhile cancels this one. A thread whose new posts wait for the
  // model (data-genui-when-ready, the health URL) is loaded again only once the model is ready; neither is loaded
  // again while a form field holds text that a reload would lose, nor while the focus is on one of the page's
  // controls (engaged, below).
  // Text that a reload would lose: what a field holds that was not sent. The header's search box keeps the query a
  // search was made with, which the page asked again for holds already.
  // A field holds what a visitor typed and has not sent: not empty, not what they sent, and, for a one-line field,
  // not the value it came with (a site bar's command from the page's address, `ls`: the page it asked for waited
  // behind it for ever). A textarea's own text is the visitor's (a refused reply's, given back), sent or not.
  function typing() {
    var fields = document.querySelectorAll("textarea, input:not([type=hidden])");
    return Array.prototype.some.call(fields, function (field) {
      var served = field.tagName === "INPUT" && field.value === field.defaultValue;
      return field.value !== "" && field.value !== field.dataset.genuiSent && !served;
    });
  }

  // A reply sent: the page that lands next (its replies being written, or the reason it was refused) says so first.
  var replySent = false;
  // The post the focus went to as its replies were being written (its id, post-N): once they are written, the
  // thread that lands puts the focus back on it, just above them (it went to the thread's top: an accessibility
  // review). Another request since, or a page without it, forgets it.
  var answering = null;
  // A section sent to be rewritten: its number as the picker shows it, and where its draft stands among the page's
  // elements (the indexes of the elements from the page down to it), which the stored page around it keeps byte for
  // byte: the rewritten section lands there, and the focus goes to it (it went to the page's top: an accessibility
  // review).
  var rewriting = null;

  document.addEventListener(
    "submit",
    function (event) {
      replySent = Boolean(event.target.matches && event.target.matches(".genui-reply"));
      var picker = event.target.matches && event.target.matches(".genui-rewrite")
        ? event.target.querySelector("select[name=section]")
        : null;
      rewriting = picker ? { n: picker.selectedIndex + 1, path: null } : null;
      var fields = event.target.querySelectorAll ? event.target.querySelectorAll("textarea, input") : [];
      Array.prototype.forEach.call(fields, function (field) {
        field.dataset.genuiSent = field.value;
      });
    },
    true
  );

  // A visitor at a control of the page itself (a link reached by Tab, a screen reader's focus): a reload would take
  // the focus back to the page's top and start the screen reader over, every Retry-After, for as long as the model
  // is busy or loading. The page asks again once the focus has left its controls (or with its link). The site bar's
  // fields are not the page's: a search sent from there waits in its box for the page it asked for.
  function engaged() {
    var focused = document.activeElement;
    var main = document.getElementById("genui-main");
    if (!focused || !main || !main.contains(focused) || focused.id === "genui-content") {
      return false;
    }
    // not an element genui.js gave the focus (a post just sent, the page itself: tabindex -1)
    var controls = "a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex='-1'])";
    return document.hasFocus() && focused.matches(controls);
  }

  // Any request htmx starts (a click, a form) is the visitor's say: a page's asking again yields to it.
  var requests = 0;
  document.addEventListener("htmx:beforeRequest", function (event) {
    requests += 1;
    var from = event.detail.elt;
    if (!(from && from.closest && from.closest(".genui-reply"))) {
      replySent = false; // another request since: what lands next is its answer, not the reply's
      answering = null;
    }
    if (!(from && from.closest && from.closest(".genui-rewrite"))) {
      rewriting = null;
    }
  });
  // a reply that got no answer (the network, a server error) lands nothing: the next page is not said to be it
  ["htmx:sendError", "htmx:responseError"].forEach(function (name) {
    document.addEventListener(name, function () {
      replySent = false;
    });
  });

  // A reader's name is typed once: the reply form fills it in with the name this browser last posted under (kept in
  // the site's local storage, where the browser allows it), as a forum's comment forms do; a reader typed it at every
  // post (a forum host's review). Filled in as served, it is no text a reload would lose (typing).
  var NAME_KEY = "genui-reply-name";
  function keptName(use) {
    try {
      return use(window.localStorage);
    } catch (error) {
      return null; // storage blocked: the name is typed, as before
    }
  }
  document.addEventListener(
    "submit",
    function (event) {
      var user = event.target.matches && event.target.matches(".genui-reply") ? event.target.elements.user : null;
      if (user && user.value && user.checkValidity()) {
        keptName(function (storage) {
          storage.setItem(NAME_KEY, user.value);
        });
      }
    },
    true
  );
  document.addEventListener("htmx:load", function () {
    var name = keptName(function (storage) {
      return storage.getItem(NAME_KEY);
    });
    if (!name) {
      return;
    }
    document.querySelectorAll(".genui-reply input[name=user]").forEach(function (user) {
      if (!user.value && !user.hasAttribute("aria-invalid")) {
        user.value = name;
        user.defaultValue = name;
      }
    });
  });

  // A reply may quote the thread: words selected in the page or its readers' posts go into the reply as "> " lines,
  // which the post shows set off as a quote (genui/shell.py's post_blocks) and the model reads as they are. The last
  // selection made in the thread is kept, since a tap on the button clears a phone's selection before its click.
  var quoted = "";

  function inThread(node) {
    var element = node && (node.nodeType === 1 ? node : node.parentElement);
    return Boolean(element && element.closest && element.closest(".genui-page, .genui-postlist"));
  }

  document.addEventListener("selectionchange", function () {
    var selection = window.getSelection ? window.getSelection() : null;
    var text = selection ? selection.toString().trim() : "";
    if (text && inThread(selection.anchorNode) && inThread(selection.focusNode)) {
      quoted = text;
    }
  });

  // Words selected in the thread while its replies are written stay selected when they land (they were lost with the
  // nodes the swap removed, to be quoted): the thread as it was is the finished page's start, node for node. Kept
  // only where the same text is there again.
  var selected = null;

  function pathTo(root, node) {
    var path = [];
    for (; node && node !== root; node = node.parentNode) {
      path.unshift(Array.prototype.indexOf.call(node.parentNode.childNodes, node));
    }
    return node === root ? path : null;
  }

  function nodeAt(root, path) {
    for (var i = 0; root && i < path.length; i++) {
      root = root.childNodes[path[i]];
    }
    return root || null;
  }

  // (Read as each message of the page's stream comes, before its swaps; put back once another page took its place.)
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var page = document.querySelector("#genui-content.genui-live > .genui-page");
    var selection = window.getSelection ? window.getSelection() : null;
    selected = null;
    if (page && selection && selection.rangeCount && !selection.isCollapsed) {
      var range = selection.getRangeAt(0);
      var start = pathTo(page, range.startContainer);
      var end = pathTo(page, range.endContainer);
      if (start && end) {
        selected = { page: page, start: start, startOffset: range.startOffset, end: end, endOffset: range.endOffset,
          text: range.toString() };
      }
    }
  });

  document.addEventListener("htmx:oobAfterSwap", function () {
    var page = document.querySelector("#genui-content > .genui-page");
    var was = selected;
    if (!was || !page || page === was.page) {
      return; // the page being written is still there (a frame, the toolbar)
    }
    selected = null;
    try {
      var range = document.createRange();
      range.setStart(nodeAt(page, was.start), was.startOffset);
      range.setEnd(nodeAt(page, was.end), was.endOffset);
      if (range.toString() === was.text) {
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
      }
    } catch (error) {
      // the page changed where the selection was: it is not kept
    }
  });

  document.addEventListener("htmx:load", function (event) {
    var root = event.target;
    if (root === document.body || (root && root.id === "genui-content")) {
      quoted = ""; // a page landed: what was selected before is not on it (a stream's frames keep it)
    }
    document.querySelectorAll(".genui-reply .genui-quote[hidden]").forEach(function (button) {
      button.hidden = false;
    });
  });

  document.addEventListener("click", function (event) {
    var button = event.target && event.target.closest ? event.target.closest(".genui-reply .genui-quote") : null;
    var field = button ? button.form.querySelector("textarea") : null;
    if (!field) {
      return;
    }
    var hint = button.parentNode.querySelector(".genui-quote-hint");
    if (!quoted) {
      hint = hint || button.parentNode.appendChild(document.createElement("span"));
      hint.className = "genui-quote-hint genui-quiet";
      hint.setAttribute("role", "status");
      hint.textContent = button.dataset.genuiHint || "";
      return;
    }
    if (hint) {
      hint.remove();
    }
    var lines = quoted.split(/\r?\n/).map(function (line) {
      return line.trim() ? "> " + line : ">";
    });
    var before = field.value.replace(/\s+$/, "");
    before = before ? before + "\n\n" : "";
    var quote = lines.join("\n") + "\n\n";
    if (field.maxLength > 0 && before.length + quote.length > field.maxLength) {
      // the field's own limit: whole lines of the quote, as many as fit
      var room = Math.max(0, field.maxLength - before.length - 2);
      // (a line cut at the end of the room, where no whole line fits, is cut between characters: an emoji is two
      // UTF-16 units, and half of one was posted as "\ufffd")
      quote = lines.join("\n").slice(0, room).replace(/\n[^\n]*$/, "").replace(/[\uD800-\uDBFF]$/, "") + "\n\n";
    }
    field.value = before + quote;
    field.focus();
    field.setSelectionRange(field.value.length, field.value.length);
    field.dispatchEvent(new Event("input", { bubbles: true }));
  });

  // A reader's post says when it was made in UTC (the page's HTML is the same for everyone, and cached); here it
  // says it in the reader's own time and their browser's way of writing dates, the UTC kept as its tooltip.
  var postTime = null;
  try {
    postTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  } catch (error) {
    postTime = null; // a browser without the options: the UTC text stays
  }

  document.addEventListener("htmx:load", function (event) {
    var root = event.target && event.target.querySelectorAll ? event.target : document;
    var times = root.querySelectorAll(".genui-post-time time[datetime]");
    for (var i = 0; postTime && i < times.length; i++) {
      var when = new Date(times[i].getAttribute("datetime"));
      if (!times[i].title && !isNaN(when.getTime())) {
        times[i].title = times[i].textContent;
        times[i].textContent = postTime.format(when);
      }
    }
  });

  document.addEventListener("htmx:load", function () {
    var marker = document.querySelector("[data-genui-retry]");
    if (!marker || marker.dataset.genuiRetrying) {
      return;
    }
    marker.dataset.genuiRetrying = "yes";
    var wait = 1000 * parseFloat(marker.dataset.genuiRetry);
    var url = marker.dataset.genuiRetryUrl;
    var health = marker.dataset.genuiWhenReady;
    var before = requests;
    function again() {
      if (!marker.isConnected || requests !== before) {
        return;
      }
      if (!health) {
        if (typing() || engaged()) {
          window.setTimeout(again, wait); // a reply being written meanwhile would be lost, the focus moved
        } else {
          window.location.assign(url);
        }
        return;
      }
      fetch(health, { cache: "no-store" }).then(
        function (answer) {
          if (answer.ok && !typing() && !engaged()) {
            if (marker.isConnected && requests === before) {
              window.location.assign(url);
            }
          } else {
            window.setTimeout(again, wait);
          }
        },
        function () {
          window.setTimeout(again, wait);
        }
      );
    }
    window.setTimeout(again, wait);
  });

  // A new version of this very page (Regenerate, a rewrite, a kept variation) is pushed as ?v=N, and a set of
  // variations at its own address. The entry it leaves names the version that was on screen, so Back shows that one:
  // the page's plain URL means its newest version, which may by then be a new one.
  // A link (or a site bar's command) to the very address on screen takes its entry's place, as a browser does: the
  // desktop's Home icon clicked three times left three entries, and Back seemed to do nothing (a desktop user's
  // review).
  document.addEventListener("htmx:beforeHistoryUpdate", function (event) {
    var history = event.detail.history;
    var content = document.getElementById("genui-content");
    var shown = content && !content.classList.contains("genui-live") ? content.dataset.version : null;
    if (!history || history.type !== "push") {
      return;
    }
    var config = event.detail.requestConfig;
    var control = config && config.elt && config.elt.closest ? config.elt.closest("#genui-toolbar") : null;
    var here = new URL(window.location.href);
    var next = new URL(history.path, window.location.href);
    var again = next.pathname === here.pathname && sameQuery(next, here);
    if (again && !control && next.searchParams.get("v") === here.searchParams.get("v")) {
      history.type = "replace";
      return;
    }
    if (!shown || !document.querySelector("#genui-toolbar form")) {
      return;
    }
    if ((control || again) && !here.searchParams.has("v")) {
      here.searchParams.set("v", shown);
      window.history.replaceState(window.history.state, "", here.pathname + here.search + here.hash);
    }
  });

  // A variation kept from its set's address takes that entry's place: Back goes to the version that was varied, not
  // to candidates already kept (their address is a 404 once one is).
  document.addEventListener("htmx:beforeHistoryUpdate", function (event) {
    var history = event.detail.history;
    var config = event.detail.requestConfig;
    var keep = config && config.elt && config.elt.closest ? config.elt.closest("form.genui-keep") : null;
    var set = keep ? keep.closest("[data-genui-set]") : null; // (a link inside a candidate pushes as any link)
    if (history && history.type === "push" && set) {
      var here = window.location.pathname + window.location.search;
      if (here === set.dataset.genuiSet) {
        history.type = "replace";
      }
    }
  });

  // Whether two addresses of one path ask for the same page: their queries but for ?v=, each value as the server
  // reads it (whitespace collapsed, composed, bidi overrides left out, empty ones dropped), so a typed `q=lisp+` is
  // the server's `q=lisp`.
  // (A key the route does not declare still counts here, where the server drops it: a link to the page itself with
  // such a key leaves the entry as it was; a page control's new version pins it all the same.)
  function sameQuery(one, other) {
    function read(url) {
      var params = new URLSearchParams(url.search);
      params.delete("v");
      return Array.from(params.entries())
        .map(function (pair) {
          var value = pair[1].replace(/[\u202a-\u202e\u2066-\u2069]/g, ""); // bidi overrides: left out, as there
          return pair[0] + "=" + value.split(/\s+/).filter(Boolean).join(" ").normalize("NFC");
        })
        .filter(function (pair) {
          return !/=$/.test(pair); // an empty value is none, as the server drops it
        })
        .sort()
        .join("&");
    }
    return read(one) === read(other);
  }

  // Back or Forward between two places in one page (an in-page link's #anchor and the page itself) only scrolls, as
  // the browser does by itself: htmx would load the page again (it keeps no copies of pages, and reloads on a miss).
  // Registered before htmx's own handler, which it stops.
  var SCROLL_KEY = "genui-scroll"; // where a page left by a click was scrolled to, across htmx's load on Back
  var placeTimer = null; // keeps the page's place in its history entry once its scrolling stops (keepPlace)
  var leaving = false; // Back or Forward to another page: this document is on its way out
  var shownAt = window.location.pathname + window.location.search;
  window.addEventListener("popstate", function (event) {
    var now = window.location.pathname + window.location.search;
    if (now !== shownAt && offlineNow()) {
      // offline, htmx's load would be the browser's "No internet" page: the page on screen stays, and the one gone
      // back to opens once the connection is back (a reader on a flaky network's review)
      event.stopImmediatePropagation();
      offline(window.location.href);
      return;
    }
    if (now === shownAt && waitingFor) {
      waitingFor = null; // back to the page on screen: nothing to open
      offline(null);
    }
    if (now !== shownAt) {
      // another page: htmx loads it, and this document's scrolling from now on (the browser's place for that
      // page, cut to this one's height) is no entry's place
      window.clearTimeout(placeTimer);
      leaving = true;
    }
    if (now === shownAt) {
      event.stopImmediatePropagation();
      // genui keeps every place itself (scrollRestoration is manual, below): where the entry was, or its #place
      var kept = event.state && typeof event.state.genuiScroll === "number" ? event.state.genuiScroll : null;
      var place = kept === null ? placeNamed(window.location.hash) : null;
      if (kept !== null) {
        window.scrollTo(0, kept);
      } else if (place) {
        place.scrollIntoView();
      } else {
        window.scrollTo(0, 0);
      }
    } else if (event.state && typeof event.state.genuiScroll === "number") {
      // htmx loads the page again, and the state with it: where it was scrolled to outlives the load here
      stored(function (storage) {
        storage.setItem(SCROLL_KEY, JSON.stringify([window.location.href, event.state.genuiScroll]));
      });
    }
    shownAt = now;
  });

  // The session's storage, where the browser allows the site one (it throws where the visitor blocks it): null else.
  function stored(use) {
    try {
      return use(window.sessionStorage);
    } catch (error) {
      return null;
    }
  }

  // Back to a page scrolled down opens it where it was: htmx keeps no copies of pages and loads it again, and the
  // browser's own place for it was saved after the next page had scrolled to its top. So the place is kept in the
  // history entry as the page is left (htmx:beforeHistoryUpdate comes before the swap), and taken back on the load.
  function keepPlace() {
    window.history.replaceState(Object.assign({}, window.history.state, { genuiScroll: window.scrollY }), "");
  }
  document.addEventListener("htmx:beforeHistoryUpdate", keepPlace);
  // A page left by Back is left with no event before it goes: its place is kept as it scrolls (once the scrolling
  // stops), so that Forward opens it there, not where the browser's place for the page before it, cut to this
  // page's height, would put it (its bottom)
  window.addEventListener(
    "scroll",
    function () {
      if (leaving) {
        return;
      }
      window.clearTimeout(placeTimer);
      placeTimer = window.setTimeout(keepPlace, 150);
    },
    { passive: true },
  );
  window.addEventListener("load", function () {
    if (!window.history.state || typeof window.history.state.genuiScroll !== "number") {
      keepPlace(); // a page loaded and not scrolled yet: its top
    }
  });
  // The browser's own restoring raced genui's: Forward to a page left by Back opened it at its bottom about one time
  // in five, the place the browser had kept for it being the page before's, cut to its height.
  if ("scrollRestoration" in window.history) {
    window.history.scrollRestoration = "manual";
  }
  var saved = stored(function (storage) {
    var place = JSON.parse(storage.getItem(SCROLL_KEY) || "null");
    storage.removeItem(SCROLL_KEY);
    return place;
  });
  var state = window.history.state;
  if (saved && saved[0] === window.location.href) {
    window.addEventListener("load", function () {
      window.scrollTo(0, saved[1]);
    });
  } else if (state && typeof state.genuiScroll === "number" && !window.location.hash) {
    window.addEventListener("load", function () {
      window.scrollTo(0, state.genuiScroll); // a reload keeps its place
    });
  }
  ["htmx:pushedIntoHistory", "htmx:replacedInHistory"].forEach(function (name) {
    document.addEventListener(name, function () {
      shownAt = window.location.pathname + window.location.search;
    });
  });

  // The site bar's boxes say what the page on screen asked, as the server fills them on a full load: the box of the
  // page's own route its query (`ls`), the others nothing. A page loaded in place left them as they were: the
  // desktop's Address showed the last web page over Settings (a desktop user's review). A box being typed in keeps
  // its text.
  function barFollows() {
    var here = new URL(window.location.href);
    Array.prototype.forEach.call(document.querySelectorAll("form.genui-query"), function (form) {
      var field = form.querySelector("input[name]");
      var typed = field && field.value !== field.defaultValue && field.value !== field.dataset.genuiSent;
      if (!field || (typed && field === document.activeElement)) {
        return;
      }
      var own = new URL(form.getAttribute("action"), here).pathname === here.pathname;
      var asked = own ? here.searchParams.get(field.name) || "" : "";
      field.value = asked.replace(/[\u202a-\u202e\u2066-\u2069]/g, ""); // as the server reads it (sameQuery)
      field.defaultValue = field.value; // as served: no text of the visitor's (typing)
    });
  }
  // A phone's on-screen keyboard stays up while its field has the focus, and a form htmx sends keeps it there: after
  // the keyboard's Go, a search's results or a command's output lay under the keyboard's half of the screen (a phone
  // user's review). On a touch screen the box lets the focus go, which the page takes as it lands; a mouse and
  // keyboard's visitor stays in it, to type the next command.
  document.addEventListener(
    "submit",
    function (event) {
      var form = event.target;
      var field = document.activeElement;
      var touch = window.matchMedia && window.matchMedia("(pointer: coarse)").matches;
      if (touch && form && form.matches && form.matches("form.genui-query") && field && form.contains(field)) {
        field.blur();
      }
    },
    true,
  );

  // (Back and Forward load the page whole: htmx keeps no copies, HTMX_CONFIG's historyCacheSize 0, so the server
  // fills the boxes then.)
  ["htmx:pushedIntoHistory", "htmx:replacedInHistory"].forEach(function (name) {
    document.addEventListener(name, barFollows);
  });

  // A streamed page ends by swapping in #genui-content, and the finished page knows its own title. (The ws
  // extension's own events fire on the placeholder, which that very swap has removed from the document.)
  // A stream may end in a failure or a set of variations too, which are said as well.
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    var content = event.target;
    if (content.id !== "genui-content") {
      return;
    }
    if (content.dataset.documentTitle) {
      document.title = content.dataset.documentTitle;
    }
    // htmx keeps the old element's class on the new one until it settles (defaultSettleDelay): look after that
    window.setTimeout(function () {
      landed(content);
    }, 100);
  });

  // A page swapped in (a click, a form, a stream's end) is said where screen readers hear it, and the focus, lost
  // with the link or button that the swap removed, goes to the page's start; a focus still on the page (a reply
  // being typed while the replies land) stays.
  document.addEventListener("htmx:afterSettle", function (event) {
    if (event.detail.target && event.detail.target.id === "genui-main") {
      if (window.location.hash && !placeNamed(window.location.hash)) {
        window.scrollTo(0, 0); // a link to a place the page does not have (yet) opens it at its top, as any other
      }
      keepPlace(); // where the page opened: Back then Forward comes back there
      landed(document.getElementById("genui-content"));
    }
  });

  function placeNamed(hash) {
    try {
      return hash ? document.getElementById(decodeURIComponent(hash.slice(1))) : null;
    } catch (error) {
      return null; // a fragment that is no text (`#50%`)
    }
  }

  // Each frame of a page being written swaps its progress line and draft in, and htmx tells of it as a swap on the
  // page's #genui-content: what landed is said once for each #genui-content, not again at every step (a screen
  // reader heard "Writing: …" at every frame of a page, 210 times for one article).
  var landedOn = null;

  // A set of variations is headed by its own h1, each variation by an h2, and each holds a page with its own h1, h2, …
  // Those are read two levels down (aria-level), so a screen reader's list of headings nests as the set does (it
  // read "h1, h2, h1, h2, h1": an accessibility review); they look as the page will.
  function nestCandidates(root) {
    var headings = root.querySelectorAll(".genui-candidate .genui-page :is(h1, h2, h3, h4, h5, h6)");
    Array.prototype.forEach.call(headings, function (heading) {
      heading.setAttribute("aria-level", String(Math.min(6, Number(heading.tagName.charAt(1)) + 2)));
    });
  }
  nestCandidates(document); // a set opened at its own address (a reload, a link)

  function landed(content) {
    var announce = document.getElementById("genui-announce");
    var main = document.getElementById("genui-main");
    if (!content || !announce || !main || !content.isConnected || content === landedOn) {
      return;
    }
    landedOn = content;
    nestCandidates(content);
    announce.textContent = saying(content);
    titled(content);
    var place = placeNamed(window.location.hash);
    if (place && content.contains(place)) {
      place.scrollIntoView(); // a link to a place on a page that was still being written when it was clicked
    }
    var focused = document.activeElement;
    var lost = !focused || focused === document.body || !focused.isConnected;
    var refused = document.getElementById("genui-form-error"); // the reason a reply was not posted (views.py)
    var posted = replySent;
    replySent = false;
    var answered = answering && !content.classList.contains("genui-live") ? document.getElementById(answering) : null;
    answering = null;
    var rewritten = rewriting;
    var page = content.querySelector(".genui-page");
    if (rewritten && page && content.classList.contains("genui-live")) {
      var draft = content.querySelector("#genui-draft.genui-in-place");
      rewritten.path = draft && page.contains(draft) ? pathOf(draft, page) : null;
    } else if (rewritten) {
      rewriting = null;
      var section = rewritten.path && page ? follow(rewritten.path, page) : null;
      if (section && lost && content.dataset.version) {
        var values = { n: rewritten.n, title: plainTitle() };
        announce.textContent = say("section_rewritten", values, "Rewritten: section {n} of {title}");
        focusOn(section);
        return;
      }
    }
    if (answered && content.contains(answered) && lost) {
      announce.textContent = say("replies_written", {}, "The replies to your post are written, below it.");
      focusOn(answered);
      return;
    }
    if (posted && !refused && content.classList.contains("genui-live")) {
      // "Writing: …" said nothing of the reply, and the focus went to the thread's top, far from it: it goes to the
      // post, just above the replies being written to it (and the form)
      announce.textContent = say("reply_posted", {}, "Your reply is posted; the replies to it are being written.");
      var posts = content.querySelectorAll(".genui-inline .genui-post"); // the thread's earlier ones come first
      var post = posts.length ? posts[posts.length - 1] : null;
      if (post && lost) {
        focusOn(post);
        answering = post.id || null;
        return;
      }
    }
    if (refused && main.contains(refused)) {
      // said once, here; where the focus went with the form's button, it goes to the field the reason is about
      // (aria-invalid), else the form's first, each of which the reason describes (aria-describedby)
      announce.textContent = refused.textContent; // "Your reply was not posted: …", in the site's words
      var form = refused.parentElement;
      var field = form.querySelector("[aria-invalid=true]") || form.querySelector("input:not([type=hidden]), textarea");
      if (field && lost) {
        field.focus({ preventScroll: true });
      }
      return;
    }
    if (lost) {
      focusPage(content);
    }
  }

  // The indexes of the elements from ``root`` down to ``element``, and the element found by them in another root.
  function pathOf(element, root) {
    var path = [];
    for (var at = element; at && at !== root; at = at.parentElement) {
      path.unshift(Array.prototype.indexOf.call(at.parentElement.children, at));
    }
    return path;
  }

  function follow(path, root) {
    var at = root;
    for (var i = 0; at && i < path.length; i += 1) {
      at = at.children[path[i]] || null;
    }
    return at === root ? null : at;
  }

  // The page itself, past the page's toolbar: the next Tab reaches its first link, a Shift+Tab the toolbar. A page
  // still being written is a group named as the live region said it ("Writing: Lisp"): unnamed, the focused element
  // took its name from its text, the progress line that each frame replaces, and a screen reader could speak it
  // again at every step (an accessibility review).
  function focusPage(content) {
    if (content.classList.contains("genui-live")) {
      content.setAttribute("role", "group");
      content.setAttribute("aria-label", saying(content));
    }
    focusOn(content);
  }

  // The focus given to an element that takes none of itself (tabindex -1: no Tab stop), without scrolling to it.
  function focusOn(element) {
    element.setAttribute("tabindex", "-1");
    element.focus({ preventScroll: true });
  }

  // "Skip to the page" focuses it without a #genui-content in the address, which would stay there: a reload would
  // open at that place instead of the one kept, and a page landing later would scroll back to it.
  document.addEventListener("click", function (event) {
    var skip = event.target && event.target.closest ? event.target.closest(".genui-skip") : null;
    var content = document.getElementById("genui-content");
    if (skip && content) {
      event.preventDefault();
      focusPage(content);
      content.scrollIntoView();
    }
  });

  // A page being written says "Loading…" until its stream opens: on a slow link its scripts came seconds after its
  // HTML, which said "Waiting for the model…" meanwhile, while the model wrote on. Open, the stream sends the page's
  // first frame as soon as there is one: until then, the page waits for the model.
  document.addEventListener("htmx:wsOpen", function (event) {
    var progress = event.target.querySelector("#genui-progress[data-genui-placeholder]");
    if (progress) {
      progress.textContent = say("waiting", {}, "Waiting for the model…");
    }
  });

  // A page's stream that never opens (a proxy that does not pass WebSockets on) would leave "Loading…" for good, the
  // ws extension trying again and again: after two closes with no open, the page goes to its wait URL
  // (data-genui-wait), which answers once the page is written. Only its drafts are lost.
  var CLOSES_BEFORE_WAITING = 2;
  document.addEventListener("htmx:wsOpen", function (event) {
    event.target.dataset.genuiOpened = "1";
  });
  document.addEventListener("htmx:wsClose", function (event) {
    var live = event.target;
    if (!live || !live.dataset || !live.isConnected) {
      return; // the page landed: its stream ends
    }
    if (live.dataset.genuiOpened) {
      // the stream was open and is gone (the server restarted, the network dropped): the extension connects again
      // where the close says it may (static/ws.js), and the next frame says where the page is; meanwhile the
      // visitor is told the last one is not the news
      var progress = live.querySelector("#genui-progress");
      var code = event.detail && event.detail.event ? event.detail.event.code : 0;
      if (progress) {
        progress.textContent = [1006, 1011, 1012, 1013].indexOf(code) < 0
          ? say("connection_closed", {}, "Connection closed: reload the page to see it written.")
          : offlineNow()
            ? say("offline_writing", {}, WRITING_OFFLINE)
            : say("connection_lost", {}, "Connection lost: connecting again…");
        var announce = document.getElementById("genui-announce");
        if (announce) {
          announce.textContent = progress.textContent; // a frame's progress line is no live region: said here
        }
      }
      return;
    }
    var wait = live.dataset.genuiWait;
    if (!wait || offlineNow()) {
      return; // offline, no socket opens: no sign that the network between refuses them (a moment in a tunnel)
    }
    var closes = Number(live.dataset.genuiCloses || 0) + 1;
    live.dataset.genuiCloses = String(closes);
    if (closes === CLOSES_BEFORE_WAITING) {
      // once: a later close would replace this navigation with another, and the first wait, gone, leave its run to
      // nobody. A copy without the stream stands in for the placeholder, so the extension, whose element is gone,
      // stops trying again while the wait URL is answered.
      var still = live.cloneNode(true);
      still.removeAttribute("ws-connect");
      live.replaceWith(still);
      window.location.replace(wait); // the wait URL redirects to the page's own: no entry of its own in history
    }
  });

  // Scripts on, yet htmx or its ws extension never ran (a browser too old to read htmx's newer syntax, an old
  // e-reader's; a script a blocker kept out): no stream is made for the placeholder, so neither of the above ever
  // comes, and <noscript> does not apply. "Loading…" stayed for good (a text-browser reader's review). A placeholder
  // that has no socket a few seconds after it came goes to its wait URL, as one whose stream never opens does: the
  // page's own, and each that htmx swaps in (a click, where htmx runs and its ws extension does not), checked once
  // htmx has processed it (htmx:load), never in the moment between its swap and its settling.
  var NO_STREAM_MS = 4000;
  function streamOrWait(live) {
    window.setTimeout(function () {
      if (!live.isConnected || !live.hasAttribute("ws-connect") || !live.dataset.genuiWait || offlineNow()) {
        return; // landed, or let go for the wait URL already
      }
      var internal = live["htmx-internal-data"]; // what htmx keeps of an element it has processed (ws.js: webSocket)
      if (!internal || !internal.webSocket) {
        window.location.replace(live.dataset.genuiWait);
      }
    }, NO_STREAM_MS);
  }
  var servedLive = document.querySelector("#genui-content[ws-connect][data-genui-wait]");
  if (servedLive) {
    streamOrWait(servedLive);
  }
  document.addEventListener("htmx:load", function (event) {
    var loaded = event.target;
    var live = loaded && loaded.matches && loaded.matches("#genui-content[ws-connect][data-genui-wait]")
      ? loaded
      : loaded && loaded.querySelector ? loaded.querySelector("#genui-content[ws-connect][data-genui-wait]") : null;
    if (live && live !== servedLive) {
      streamOrWait(live);
    }
  });

  // Offline, the page being read stays: a link tapped waits for the connection (the browser's own page said "no
  // internet" in place of the page read, and came back by itself up to half a minute after the network did), and a
  // page being written says why no frame comes.
  var WRITING_OFFLINE = "You are offline: the page carries on once the connection is back.";
  var waitingFor = null; // the address of a link tapped offline

  function announced(text) {
    var announce = document.getElementById("genui-announce");
    if (announce) {
      announce.textContent = text;
    }
  }

  // What the live region says is emptied ANNOUNCED_MS after it is said, as react-aria's announcer empties its own:
  // left there, a copy of the whole page (Ctrl+A, Ctrl+C) began "Loaded: Lisp — Genpedia", and the browser's find
  // met a thread's title there before the thread's own heading (an everyday reader's review).
  var ANNOUNCED_MS = 7000;
  var region = document.getElementById("genui-announce");
  if (region && window.MutationObserver) {
    var quiet = null;
    new MutationObserver(function () {
      window.clearTimeout(quiet);
      if (region.textContent) {
        quiet = window.setTimeout(function () {
          region.textContent = "";
        }, ANNOUNCED_MS);
      }
    }).observe(region, { childList: true, characterData: true, subtree: true });
  }

  function offline(url) {
    waitingFor = url || waitingFor;
    var line = document.getElementById("genui-offline");
    if (!line) {
      line = document.createElement("p");
      line.id = "genui-offline";
      line.className = "genui-offline";
      document.body.appendChild(line);
    }
    line.textContent = waitingFor
      ? say("offline_link", {}, "You are offline: the page asked for opens once the connection is back.")
      : say("offline", {}, "You are offline.");
    announced(line.textContent);
    unanswered(); // offline, this line says why nothing comes
    if (waitingFor && !polling) {
      // the server may answer before the browser says it is online (a server on this laptop, restarted)
      polling = window.setInterval(function () {
        probe(function (answers) {
          if (answers) {
            backOnline();
          }
        });
      }, 4000);
    }
  }
  var polling = null;

  // a request since (a reply sent, another link) is what the visitor wants now, not the link tapped before it
  ["submit", "htmx:beforeRequest"].forEach(function (name) {
    document.addEventListener(name, function () {
      if (waitingFor) {
        waitingFor = null;
        offline(null); // (still offline: its line says only that)
      }
    });
  });

  window.addEventListener("offline", function () {
    reached = false;
    probe(function (answers) {
      if (answers || navigator.onLine !== false) {
        return; // a server on this device, or back online before this failed: nothing to say
      }
      var progress = document.querySelector(".genui-live #genui-progress");
      if (progress) {
        progress.textContent = say("offline_writing", {}, WRITING_OFFLINE);
      }
      offline(null); // said once, by the line at the foot of the screen
    });
  });

  // A request of the page's (a link, a form) still unanswered after a few seconds says so where the offline line
  // would, until it ends, however it ends: in a tunnel the header's spinner was the only sign, for many seconds. A
  // page being written is answered at once (its stream says how far it is). 6 s: past what a small page's answer
  // takes on a slow phone network, and before the 10 s after which a visitor stops waiting for a tap to do something.
  var UNANSWERED_MS = 6000;
  var late = []; // requests sent UNANSWERED_MS ago or more, not ended

  function unanswered() {
    var line = document.getElementById("genui-unanswered");
    var waited = late.some(function (xhr) {
      return !forMain.has(xhr) || xhr === latest; // an earlier click's page is thrown away when it comes
    });
    if (!waited || offlineNow() || document.getElementById("genui-offline")) {
      if (line) {
        line.remove();
      }
      return;
    }
    if (!line) {
      line = document.createElement("p");
      line.id = "genui-unanswered";
      line.className = "genui-offline"; // the offline line's place and look
      line.textContent = say("unanswered", {}, "The server has not answered yet: the connection may be slow.");
      document.body.appendChild(line);
      announced(line.textContent);
    }
  }

  function watched(xhr) {
    var timer = window.setTimeout(function () {
      late.push(xhr);
      unanswered();
    }, UNANSWERED_MS);
    xhr.addEventListener("loadend", function () {
      window.clearTimeout(timer);
      late = late.filter(function (other) {
        return other !== xhr;
      });
      unanswered();
    });
  }
  // (Back and Forward load the page as the browser does, with its own signs: htmx keeps no copies, and refreshes.)
  document.addEventListener("htmx:beforeSend", function (event) {
    watched(event.detail.xhr);
  });

  // A stream's connection may be dead with the browser never told (a laptop that slept, a network changed under
  // it): where the tab comes back (online, or resumed after being frozen), each stream open is opened anew. The old
  // socket is closed as a drop (4000), so its run waits on the server for the new one rather than ending.
  // A stream says something at least every 5 s (genui/stream.py's HEARTBEAT_S): one silent for 20 s is taken for
  // dead and opened anew too.
  var SILENT_MS = 20000;
  document.addEventListener("htmx:wsOpen", function (event) {
    event.target.genuiStream = { socket: event.detail.event.target, wrapper: event.detail.socketWrapper };
    event.target.genuiHeard = Date.now();
  });
  document.addEventListener("htmx:wsAfterMessage", function (event) {
    event.target.genuiHeard = Date.now();
  });

  function reopen(silentOnly) {
    document.querySelectorAll("[ws-connect]").forEach(function (element) {
      var stream = element.genuiStream;
      if (!stream || stream.socket.readyState !== WebSocket.OPEN) {
        return; // connecting, or closed and waiting to try again: the extension does that within 4 s
      }
      if (silentOnly && !(element.genuiHeard < Date.now() - SILENT_MS)) {
        return;
      }
      stream.socket.onclose = null; // not the extension's reconnect too: one new socket
      stream.socket.close(4000);
      stream.wrapper.reconnect();
    });
  }
  window.setInterval(function () {
    reopen(true);
  }, SILENT_MS / 4);

  function backOnline() {
    window.clearInterval(polling);
    polling = null;
    var line = document.getElementById("genui-offline");
    if (line) {
      line.remove();
    }
    unanswered(); // a request still waiting for its answer says so again
    // a form that could not be sent offline says it can be now (it kept what was typed)
    document.querySelectorAll(".genui-send-error").forEach(function (said) {
      said.textContent = say("back_online", {}, "You are back online: send it again.");
    });
    var progress = document.querySelector(".genui-live #genui-progress");
    if (progress) {
      progress.textContent = say("connection_lost", {}, "Connection lost: connecting again…");
    }
    if (waitingFor) {
      var url = waitingFor;
      waitingFor = null;
      if (!typing()) {
        window.location.assign(url);
        return; // (a reply typed since stays on screen: the page asked for is the visitor's to ask again)
      }
    }
    reopen(false);
  }
  window.addEventListener("online", backOnline);
  document.addEventListener("resume", function () {
    reopen(false);
  });

  // A thread on screen says when readers post to it meanwhile: a class reading one thread saw none of the others'
  // posts until each reloaded it (a teacher's review). While the tab is seen, and no page is being written, the
  // thread's news URL (data-genui-news: the posts after those it shows) is asked every NEWS_MS, and at once as the
  // tab is seen again; its answer is a line at the foot of the screen with a link to the thread as it is now. Nothing
  // loads by itself. While a reply is typed, the line says that posting it shows them, in place of its link, which
  // would lose what was typed.
  var NEWS_MS = 20000;

  function newsTyping() {
    var line = document.getElementById("genui-news");
    if (line) {
      var typed = typing();
      line.querySelector("a").hidden = typed;
      line.querySelector(".genui-news-typing").hidden = !typed;
    }
  }

  // A line of another page, or of the thread shown again since (its new posts on screen), goes.
  function staleNews() {
    var line = document.getElementById("genui-news");
    var posts = document.querySelector("#genui-posts[data-genui-news]");
    if (line && (!posts || line.dataset.genuiFor !== posts.dataset.genuiNews)) {
      line.remove();
    }
    return posts;
  }

  function news() {
    var posts = staleNews();
    if (!posts || document.hidden || offlineNow() || document.querySelector("#genui-content.genui-live")) {
      return;
    }
    var url = posts.dataset.genuiNews;
    window.fetch(url, { cache: "no-store", credentials: "same-origin" }).then(
      function (answer) {
        if (!posts.isConnected) {
          return;
        }
        if (answer.status === 204) {
          var gone = document.getElementById("genui-news");
          if (gone) {
            gone.remove();
          }
          return;
        }
        if (!answer.ok) {
          return; // a server that cannot say now (restarting, its cache gone): asked again in a while
        }
        return answer.text().then(function (text) {
          var said = new DOMParser().parseFromString(text, "text/html").getElementById("genui-news");
          var shown = document.getElementById("genui-news");
          if (!said || !posts.isConnected) {
            return;
          }
          if (shown && shown.dataset.genuiCount === said.dataset.genuiCount) {
            newsTyping(); // the same line: said again, a screen reader would hear it again
            return;
          }
          var fresh = document.importNode(said, true);
          fresh.dataset.genuiFor = url;
          if (shown) {
            shown.replaceWith(fresh);
          } else {
            document.body.appendChild(fresh);
          }
          htmx.process(fresh);
          newsTyping();
        });
      },
      function () {} // no answer: the offline line says so where it is that
    );
  }
  window.setInterval(news, NEWS_MS);
  document.addEventListener("visibilitychange", news);
  document.addEventListener("input", newsTyping);
  ["htmx:afterSwap", "htmx:oobAfterSwap"].forEach(function (name) {
    document.addEventListener(name, staleNews);
  });

  // The tab says that a page is being written ("Writing: Lisp — Genpedia"), as a browser's tab turns while a page
  // loads, and the page's own title once it lands: a reader who went to another tab while it was written sees there
  // that it has (the tab said "Lisp — Genpedia" throughout).
  var writingTitle = null; // the title shown while the page is written, and the page's own under it
  function plainTitle() {
    return writingTitle && document.title === writingTitle.shown ? writingTitle.plain : document.title;
  }
  function titled(content) {
    if (content.classList.contains("genui-live")) {
      var plain = plainTitle();
      writingTitle = { plain: plain, shown: say("writing_page", { title: plain }, "Writing: {title}") };
      document.title = writingTitle.shown;
    } else if (writingTitle) {
      if (document.title === writingTitle.shown) {
        document.title = writingTitle.plain; // a failure that named no title of its own
      }
      writingTitle = null;
    }
  }
  var opened = document.getElementById("genui-content");
  if (opened) {
    titled(opened); // a typed URL's page, written as it opens
  }

  // A page being written may be stopped, as a browser's Stop button or Escape stops a page that loads (a reader who
  // clicked the wrong link waited the whole page out, or left for another). Its stream closes as a visitor's who
  // leaves (1000), so the run ends where no other tab watches it; the draft stays as far as it came, and the
  // progress line says it stopped, with a link that opens the page again. Nothing connects again: the element no
  // longer holds ws-connect (the wait URL, reopening and the offline line all look for it), and a frame that was on
  // its way is not swapped in.
  function stopWriting(live) {
    var button = live && live.querySelector(".genui-stop");
    if (!button || !live.isConnected || !live.hasAttribute("ws-connect")) {
      return false; // no Stop: a thread's replies to a reader's post, written though every reader leaves
    }
    var hadFocus = document.activeElement === button;
    live.removeAttribute("ws-connect");
    live.dataset.genuiStopped = "1";
    live.classList.remove("genui-live");
    live.classList.add("genui-stopped");
    [live].concat(Array.prototype.slice.call(live.querySelectorAll("[aria-busy]"))).forEach(function (element) {
      element.removeAttribute("aria-busy");
    });
    var internal = live["htmx-internal-data"]; // the ws extension's socket (ws.js: webSocket), once it made one
    var socket = internal && internal.webSocket ? internal.webSocket.socket : null;
    if (socket) {
      socket.onclose = null; // no reconnect (a socket still connecting closes as 1006) and no "Connection closed"
      socket.close(1000);
    }
    button.remove();
    var progress = live.querySelector("#genui-progress");
    if (progress) {
      progress.removeAttribute("data-genui-placeholder");
      var line = document.createElement("span"); // one run of text: a flex line drops a text node's last space
      line.textContent = say("stopped", {}, "Stopped.") + " ";
      var again = line.appendChild(document.createElement("a"));
      again.href = button.dataset.genuiAgain || window.location.href;
      again.textContent = say("open_again", {}, "Open the page again");
      progress.replaceChildren(line);
      if (hadFocus) {
        again.focus();
      }
    }
    if (writingTitle && document.title === writingTitle.shown) {
      document.title = writingTitle.plain;
    }
    writingTitle = null;
    announced(say("stopped", {}, "Stopped."));
    return true;
  }
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    if (event.target && event.target.dataset && event.target.dataset.genuiStopped) {
      event.preventDefault(); // a frame sent before the close reached the server
    }
  });
  document.addEventListener("click", function (event) {
    var button = event.target && event.target.closest ? event.target.closest(".genui-stop") : null;
    if (button) {
      stopWriting(button.closest("[ws-connect]"));
    }
  });
  // Escape anywhere but in a field (whose own Escape it is: a search box's clearing, a reply being typed)
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) {
      return;
    }
    if (target && target.closest && target.closest("input, textarea, select, [contenteditable]")) {
      return;
    }
    if (stopWriting(document.querySelector("#genui-content[ws-connect]"))) {
      event.preventDefault();
    }
  });
  function stoppable() {
    document.querySelectorAll("[ws-connect] > .genui-stop[hidden]").forEach(function (button) {
      button.hidden = false;
    });
  }
  stoppable();
  document.addEventListener("htmx:load", stoppable);

  // What the live region says of what landed: its own words for a failure, the count of a set of variations; a page
  // being written is said as it starts (its progress line is new on every frame, which screen readers pass over).
  function saying(content) {
    var live = content.classList.contains("genui-live");
    if (content.classList.contains("genui-error")) {
      var why = content.querySelector("p");
      return why ? why.textContent : document.title;
    }
    if (content.classList.contains("genui-variations")) {
      var count = content.querySelectorAll(".genui-candidate").length;
      return live
        ? say("writing_variations", { n: count }, "Writing {n} variations")
        : say("variations_written", { n: count }, "{n} variations written: keep one of them");
    }
    var version = Number(content.dataset.version || 0);
    var values = { title: plainTitle(), n: version }; // not "Writing: Writing: Lisp" (a typed URL's page)
    if (live) {
      return say("writing_page", values, "Writing: {title}");
    }
    return version > 1 // a version other than the first: Regenerate, a rewrite
      ? say("loaded_version", values, "Loaded: {title}, version {n}")
      : say("loaded", values, "Loaded: {title}");
  }

  // The link a visitor's pointer rests on, or their keyboard's focus reaches, is likely the next click. While genui
  // serve reads ahead, the page's main element names where to say so (data-genui-hint), and that page is written
  // next while no visitor waits, so that the click finds it written. A pointer that only crosses a link says nothing,
  // and a focus that a mouse click gave says nothing either (the click itself follows); a link is told once until
  // another is, or the page changes.
  var HINT_AFTER_MS = 100;
  var hintTimer = null;
  var lastHint = null;

  function hint(link) {
    var main = document.getElementById("genui-main");
    var url = main ? main.dataset.genuiHint : null;
    var href = link.getAttribute("href");
    if (!url || !main.contains(link) || href === lastHint) {
      return;
    }
    lastHint = href;
    window
      .fetch(url, {
        method: "POST",
        body: new URLSearchParams({ href: href }),
        headers: { "HX-Current-URL": window.location.href },
        credentials: "same-origin",
      })
      .catch(function () {}); // only a hint: a click still works without it
  }

  function later(link) {
    window.clearTimeout(hintTimer);
    if (link) {
      hintTimer = window.setTimeout(function () {
        hint(link);
      }, HINT_AFTER_MS);
    }
  }

  function pageLink(event) {
    return event.target && event.target.closest ? event.target.closest("a[hx-get][href]") : null;
  }

  document.addEventListener("mouseover", function (event) {
    later(pageLink(event));
  });
  document.addEventListener("focusin", function (event) {
    var link = pageLink(event);
    later(link && link.matches(":focus-visible") ? link : null);
  });
  ["mouseout", "focusout"].forEach(function (name) {
    document.addEventListener(name, function () {
      window.clearTimeout(hintTimer);
    });
  });
  // A new page, or a page finished in place, has links of its own: any of them may be told again.
  ["htmx:afterSwap", "htmx:oobAfterSwap"].forEach(function (name) {
    document.addEventListener(name, function () {
      lastHint = null;
    });
  });
})();
