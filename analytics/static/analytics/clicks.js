/* Search analytics: tell the server which result of the current search was opened.
 * Sends {query, item_id} to POST /api/analytics/click when a result card's link is followed (click,
 * middle-click or keyboard). The query is the page URL's `q`; nothing is sent outside a search.
 * keepalive lets the request finish while the browser navigates to the item. */
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector("meta[name='csrf-token']");
    return meta ? meta.getAttribute("content") : "";
  }

  function report(event) {
    if (event.type === "auxclick" && event.button !== 1) return;
    var link = event.target && event.target.closest ? event.target.closest("a[href]") : null;
    var card = link ? link.closest("[data-item-id]") : null;
    if (!card) return;
    var query = new URL(window.location.href).searchParams.get("q");
    var itemId = parseInt(card.getAttribute("data-item-id"), 10);
    if (!query || !query.trim() || !itemId) return;
    try {
      fetch("/api/analytics/click", {
        method: "POST",
        keepalive: true,
        credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-CSRFToken": csrfToken()},
        body: JSON.stringify({query: query, item_id: itemId})
      }).catch(function () { /* analytics only: never in the user's way */ });
    } catch (e) { /* old browser without fetch keepalive: skip */ }
  }

  document.addEventListener("click", report, true);
  document.addEventListener("auxclick", report, true);
})();
