/*
 * /browse page controller: URL parameters <-> filter panel, loading the results region, view toggles,
 * "Load more", cold-start prompt cards.
 *
 * Every state is a URL: the page asks the server for the results region of a URL
 * (GET /browse?... with the header X-KB-Partial: results) and swaps it in, so cards have one renderer
 * (the Django templates) and the page also works without JavaScript.
 *
 * Public hook for other apps (the presets bar):
 *   window.kbBrowse.applyParams(params)  replace the filters with `params` ({domain: ["pricing"], ...});
 *                                        `q`, `from_bid` and `sources` are kept unless `params` sets them
 *   window.kbBrowse.setQuery(text)       change the query, keep the filters ("" = browse mode)
 *   window.kbBrowse.currentParams()      the current URL parameters as an object (lists as arrays)
 *   window.kbBrowse.reload()             load the current URL again
 *   document event "kb:paramschange"     fired after each change, detail = currentParams()
 */
(function () {
  "use strict";

  var root = document.getElementById("kb-browse");
  if (!root) return;

  var results = document.getElementById("results");
  var filterForm = document.getElementById("kb-filters");
  var panel = document.getElementById("filter-panel");
  var filterCount = document.getElementById("filter-count");
  var sortField = document.getElementById("sort-field");
  var sortSelect = document.getElementById("kb-sort");
  var quiet = document.getElementById("kb-quiet-notice");
  var failed = document.getElementById("kb-failed-notice");
  var retryButton = document.getElementById("kb-retry");
  var searchInput = document.getElementById("kb-q");
  var hideThumbs = document.getElementById("kb-hide-thumbs");
  // "All knowledge bases" (shown when the visitor may see a peer): the URL's sources=all, kept like q.
  var allKbs = document.getElementById("kb-all-kbs");

  var LIST_PARAMS = ["domain", "subtopic", "content_type", "platform", "author", "layer", "source"];
  var FILTER_PARAMS = LIST_PARAMS.concat([
    "language", "include_qa", "date_from", "date_to", "freshness", "overdue_review",
    "review_due_within_days", "unread_only", "include_superseded"
  ]);
  // Filter prompt cards may only set these (the server applies the same whitelist).
  var CARD_FILTER_KEYS = ["domain", "content_type", "include_qa", "source", "date_from", "freshness", "layer"];
  var CACHE_MS = 30000;
  var VIEW_KEY = "kb.browse.view";
  var THUMBS_KEY = "kb.browse.hideThumbs";

  var cache = new Map(); // url -> {html, time}
  var controller = null;
  var sequence = 0;
  var retry = null;

  function has(obj, key) {
    return Object.prototype.hasOwnProperty.call(obj, key);
  }

  function storageGet(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }

  function storageSet(key, value) {
    try { window.localStorage.setItem(key, value); } catch (e) { /* private mode: not remembered */ }
  }

  function currentUrl() {
    return location.pathname + location.search;
  }

  function currentParams() {
    var out = {};
    new URLSearchParams(location.search).forEach(function (value, key) {
      if (LIST_PARAMS.indexOf(key) !== -1) {
        out[key] = (out[key] || []).concat(value.split(",").filter(Boolean));
      } else {
        out[key] = value;
      }
    });
    return out;
  }

  function isDefault(key, value) {
    if (value === null || value === undefined || value === "" || value === false) return true;
    if (Array.isArray(value)) return value.length === 0;
    if (key === "include_qa") return ["1", "true", "on", "yes", true].indexOf(value) !== -1;
    return false;
  }

  function buildUrl(params) {
    var search = new URLSearchParams();
    ["q", "from_bid"].forEach(function (key) {
      if (params[key]) search.set(key, params[key]);
    });
    if (params.sources === "all") search.set("sources", "all");
    if (!params.q && params.sort && params.sort !== "newest") search.set("sort", params.sort);
    FILTER_PARAMS.forEach(function (key) {
      var value = params[key];
      if (isDefault(key, value)) return;
      if (Array.isArray(value)) {
        value.forEach(function (v) { if (v !== "") search.append(key, String(v)); });
      } else {
        search.set(key, value === true ? "1" : String(value));
      }
    });
    var query = search.toString();
    return "/browse" + (query ? "?" + query : "");
  }

  function applyParams(params) {
    params = params || {};
    var current = currentParams();
    var next = {
      q: has(params, "q") ? params.q : current.q,
      from_bid: has(params, "from_bid") ? params.from_bid : current.from_bid,
      sources: has(params, "sources") ? params.sources : current.sources,
      sort: has(params, "sort") ? params.sort : current.sort
    };
    Object.keys(params).forEach(function (key) {
      if (FILTER_PARAMS.indexOf(key) !== -1) next[key] = params[key];
    });
    return navigate(buildUrl(next));
  }

  function setQuery(text) {
    var params = currentParams();
    params.q = (text || "").trim();
    delete params.cursor;
    return navigate(buildUrl(params));
  }

  function formParams() {
    var data = new FormData(filterForm);
    var out = {};
    FILTER_PARAMS.forEach(function (key) {
      var values = data.getAll(key).filter(function (v) { return v !== ""; });
      if (!values.length) return;
      out[key] = LIST_PARAMS.indexOf(key) !== -1 ? values : values[values.length - 1];
    });
    if (sortSelect) out.sort = sortSelect.value;
    if (allKbs) out.sources = allKbs.checked ? "all" : null;
    return out;
  }

  function syncControls() {
    var params = currentParams();
    var active = 0;
    Array.prototype.forEach.call(filterForm.elements, function (el) {
      if (!el.name || FILTER_PARAMS.indexOf(el.name) === -1 || el.type === "hidden") return;
      var value = params[el.name];
      if (el.type === "checkbox") {
        if (el.name === "include_qa") {
          el.checked = value === undefined || isDefault("include_qa", value);
        } else if (LIST_PARAMS.indexOf(el.name) !== -1) {
          el.checked = (value || []).indexOf(el.value) !== -1;
        } else {
          el.checked = value !== undefined && !isDefault(el.name, value) && value !== "0";
        }
      } else {
        var v = Array.isArray(value) ? value[0] : value;
        el.value = v || "";
      }
    });
    FILTER_PARAMS.forEach(function (key) {
      if (has(params, key) && !isDefault(key, params[key])) active += 1;
    });
    filterCount.textContent = active + " active";
    filterCount.hidden = active === 0;
    filterForm.querySelectorAll("input[type=hidden][name=q], input[type=hidden][name=from_bid]").forEach(function (el) {
      el.remove();
    });
    if (searchInput && document.activeElement !== searchInput) searchInput.value = params.q || "";
    var clear = document.getElementById("kb-clear-q");
    if (clear) clear.hidden = !(params.q || (searchInput && searchInput.value));
    if (sortField) sortField.hidden = Boolean(params.q);
    if (sortSelect) sortSelect.value = params.sort || "newest";
    if (allKbs) allKbs.checked = params.sources === "all";
    document.title = (params.q ? params.q + " · " : "") + "Browse · Knowledge base";
    var heading = root.querySelector(".page-title");
    if (heading) heading.textContent = params.q ? "Search results" : "Browse the knowledge base";
  }

  function showQuiet(text) {
    quiet.textContent = text;
    quiet.hidden = !text;
  }

  function showFailed(action) {
    retry = action;
    failed.hidden = !action;
  }

  function setLoading(loading) {
    results.setAttribute("aria-busy", loading ? "true" : "false");
    root.classList.toggle("is-loading", loading);
  }

  function render(html) {
    results.innerHTML = html;
  }

  function retryAfterText(response) {
    var seconds = parseInt(response.headers.get("Retry-After") || "", 10);
    return "Too many searches — try again in " + (seconds > 0 ? seconds : 60) + " s.";
  }

  function navigate(url, push) {
    if (push !== false && url !== currentUrl()) history.pushState({kb: true}, "", url);
    syncControls();
    document.dispatchEvent(new CustomEvent("kb:paramschange", {detail: currentParams()}));
    return load(url);
  }

  function load(url) {
    var hit = cache.get(url);
    showFailed(null);
    if (hit && Date.now() - hit.time < CACHE_MS) {
      showQuiet("");
      render(hit.html);
      return Promise.resolve();
    }
    if (controller) controller.abort();
    controller = new AbortController();
    var mine = ++sequence;
    setLoading(true);
    return fetch(url, {
      headers: {"X-KB-Partial": "results"},
      credentials: "same-origin",
      signal: controller.signal
    }).then(function (response) {
      if (mine !== sequence) return;
      if (response.status === 429) {
        // Keep what is on screen (or a stale copy of this URL) and say so quietly.
        if (hit) render(hit.html);
        showQuiet(retryAfterText(response));
        return;
      }
      if (!response.headers.get("X-KB-Rendered")) throw new Error("HTTP " + response.status);
      return response.text().then(function (html) {
        if (mine !== sequence) return;
        if (response.ok) cache.set(url, {html: html, time: Date.now()});
        showQuiet("");
        render(html);
      });
    }).catch(function (error) {
      if (error && error.name === "AbortError") return;
      if (mine !== sequence) return;
      showFailed(function () { return load(url); });
    }).then(function () {
      if (mine === sequence) setLoading(false);
    });
  }

  function loadMore(link) {
    var url = link.getAttribute("href");
    // A results request started after this one replaces the list: this page belongs to the old one.
    var mine = sequence;
    link.setAttribute("aria-disabled", "true");
    link.textContent = "Loading…";
    return fetch(url, {headers: {"X-KB-Partial": "page"}, credentials: "same-origin"}).then(function (response) {
      if (mine !== sequence) return;
      if (response.status === 429) {
        showQuiet(retryAfterText(response));
        link.removeAttribute("aria-disabled");
        link.textContent = "Load more";
        return;
      }
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.text().then(function (html) {
        if (mine !== sequence) return;
        var holder = document.createElement("template");
        holder.innerHTML = html;
        var list = results.querySelector(".cards");
        var newCards = holder.content.querySelectorAll(".cards > li");
        newCards.forEach(function (li) { list.appendChild(li); });
        var pager = results.querySelector(".pager");
        var newPager = holder.content.querySelector(".pager");
        if (pager && newPager) pager.replaceWith(newPager);
        if (newCards[0]) {
          var first = newCards[0].querySelector("a");
          if (first) first.focus();
        }
      });
    }).catch(function () {
      if (mine !== sequence) return;
      link.removeAttribute("aria-disabled");
      link.textContent = "Load more";
      showFailed(function () { return loadMore(link); });
    });
  }

  function openDomainFilter() {
    panel.open = true;
    var group = document.getElementById("filter-domain");
    if (group) {
      group.scrollIntoView({block: "nearest"});
      var first = group.querySelector("input");
      if (first) first.focus();
    }
  }

  function recordRecent(query) {
    if (window.kbRecent) window.kbRecent.add(query);
  }

  // --- view mode and thumbnails (remembered in localStorage) ---
  function applyView(view) {
    view = view === "list" ? "list" : "grid";
    root.setAttribute("data-view", view);
    root.querySelectorAll("[data-view-button]").forEach(function (button) {
      button.setAttribute("aria-pressed", button.getAttribute("data-view-button") === view ? "true" : "false");
    });
  }

  function applyThumbs(hidden) {
    root.classList.toggle("hide-thumbs", hidden);
    if (hideThumbs) hideThumbs.checked = hidden;
  }

  applyView(storageGet(VIEW_KEY));
  applyThumbs(storageGet(THUMBS_KEY) === "1");
  root.querySelectorAll("[data-view-button]").forEach(function (button) {
    button.addEventListener("click", function () {
      var view = button.getAttribute("data-view-button");
      storageSet(VIEW_KEY, view);
      applyView(view);
    });
  });
  if (hideThumbs) {
    hideThumbs.addEventListener("change", function () {
      storageSet(THUMBS_KEY, hideThumbs.checked ? "1" : "0");
      applyThumbs(hideThumbs.checked);
    });
  }

  // --- filter panel ---
  root.classList.add("js");
  filterForm.addEventListener("change", function () { applyParams(formParams()); });
  filterForm.addEventListener("submit", function (event) {
    event.preventDefault();
    applyParams(formParams());
  });
  if (sortSelect) {
    sortSelect.addEventListener("change", function (event) {
      event.stopPropagation();
      var params = currentParams();
      params.sort = sortSelect.value;
      navigate(buildUrl(params));
    });
  }
  if (allKbs) {
    // outside the form (form="kb-filters"): its change event does not bubble to the form
    allKbs.addEventListener("change", function () {
      var params = currentParams();
      params.sources = allKbs.checked ? "all" : null;
      delete params.cursor;
      navigate(buildUrl(params));
    });
  }
  document.getElementById("kb-clear-filters").addEventListener("click", function (event) {
    event.preventDefault();
    var keep = {};
    FILTER_PARAMS.forEach(function (key) { keep[key] = null; });
    applyParams(keep);
  });
  retryButton.addEventListener("click", function () {
    if (retry) retry();
  });

  // --- clicks inside the results region (delegated: the region is replaced on each load) ---
  results.addEventListener("click", function (event) {
    var target = event.target.closest("a, button");
    if (!target || !results.contains(target)) return;
    if (target.hasAttribute("data-load-more")) {
      event.preventDefault();
      if (target.getAttribute("aria-disabled") !== "true") loadMore(target);
    } else if (target.hasAttribute("data-retry")) {
      event.preventDefault();
      cache.delete(currentUrl());
      load(currentUrl());
    } else if (target.hasAttribute("data-clear-query")) {
      event.preventDefault();
      setQuery("");
    } else if (target.hasAttribute("data-prompt-query")) {
      event.preventDefault();
      var query = target.getAttribute("data-prompt-query");
      recordRecent(query);
      setQuery(query);
    } else if (target.hasAttribute("data-prompt-params")) {
      event.preventDefault();
      var raw = JSON.parse(target.getAttribute("data-prompt-params") || "{}");
      var params = {};
      Object.keys(raw).forEach(function (key) {
        if (CARD_FILTER_KEYS.indexOf(key) !== -1) params[key] = raw[key];
      });
      applyParams(params);
    } else if (target.hasAttribute("data-chip-domain")) {
      event.preventDefault();
      applyParams({domain: [target.getAttribute("data-chip-domain")]});
    } else if (target.hasAttribute("data-more-domains")) {
      event.preventDefault();
      openDomainFilter();
    }
  });

  window.addEventListener("popstate", function () {
    syncControls();
    document.dispatchEvent(new CustomEvent("kb:paramschange", {detail: currentParams()}));
    load(currentUrl());
  });

  // The server rendered the first state: seed the cache with it.
  if (results.querySelector(".results__inner[data-status='200']")) {
    cache.set(currentUrl(), {html: results.innerHTML, time: Date.now()});
  }

  window.kbBrowse = {
    applyParams: applyParams,
    setQuery: setQuery,
    currentParams: currentParams,
    reload: function () { cache.delete(currentUrl()); return load(currentUrl()); },
    openFilters: openDomainFilter,
    recordRecent: recordRecent
  };
})();
