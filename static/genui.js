// genui's page glue. The CSP allows no inline script, so the little the page needs beyond htmx lives here.
(function () {
  "use strict";

  // Error pages (a 404, a rejected reply, a busy model) are pages too: show them where the page would have gone.
  var SHOWN_ERRORS = [400, 403, 404, 405, 409, 411, 413, 429, 503];
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (SHOWN_ERRORS.indexOf(event.detail.xhr.status) >= 0) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // A page asked for too soon (a 503 with Retry-After: the model loading or busy) asks again by itself: after
  // data-genui-retry seconds it goes to data-genui-retry-url. htmx drops the <head> of a page it swaps in, and with
  // it any refresh there; and a click elsewhere meanwhile cancels this one. A thread whose new posts wait for the
  // model (data-genui-when-ready, the health URL) is loaded again only once the model is ready, and not while a
  // form field holds text that a reload would lose.
  function typing() {
    return Array.prototype.some.call(document.querySelectorAll("textarea, input:not([type=hidden])"), function (field) {
      return field.value !== "";
    });
  }

  document.addEventListener("htmx:load", function () {
    var marker = document.querySelector("[data-genui-retry]");
    if (!marker || marker.dataset.genuiRetrying) {
      return;
    }
    marker.dataset.genuiRetrying = "yes";
    var wait = 1000 * parseFloat(marker.dataset.genuiRetry);
    var url = marker.dataset.genuiRetryUrl;
    var health = marker.dataset.genuiWhenReady;
    function again() {
      if (!marker.isConnected) {
        return;
      }
      if (!health) {
        window.location.assign(url);
        return;
      }
      fetch(health, { cache: "no-store" }).then(
        function (answer) {
          if (answer.ok && !typing()) {
            if (marker.isConnected) {
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

  // A streamed page ends by swapping in #genui-content, and the finished page knows its own title. (The ws
  // extension's own events fire on the placeholder, which that very swap has removed from the document.)
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    var content = event.target;
    if (content.id === "genui-content" && content.dataset.documentTitle) {
      document.title = content.dataset.documentTitle;
    }
  });
})();
