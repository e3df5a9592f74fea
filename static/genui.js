// genui's page glue. The CSP allows no inline script, so the little the page needs beyond htmx lives here.
(function () {
  "use strict";

  // Error pages (a 404, a rejected reply, a busy model) are pages too: show them where the page would have gone.
  var SHOWN_ERRORS = [400, 403, 404, 405, 409, 411, 413, 503];
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (SHOWN_ERRORS.indexOf(event.detail.xhr.status) >= 0) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
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
