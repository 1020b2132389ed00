/*
 * The inline search bar of /browse: a combobox whose dropdown shows recent searches, a live preview
 * (GET /api/search/preview) and popular topics.
 *
 * Live preview rules: nothing is requested under 3 characters; requests wait for 300 ms of quiet
 * typing; a change of the text aborts the request in flight (AbortController) and every answer carries
 * its request's sequence number, so only the answer to the latest request for the text now typed renders;
 * answers are cached for 30 s; a 429 keeps the results already shown (no error toast). Each row's title
 * is inserted as text, with <mark> elements around the server's title_spans (the typed words); a row found
 * through its body also shows the server's snippet, marked at its snippet_spans.
 * Submitting (Enter, the button, picking an option) cancels the pending and the in-flight preview and
 * closes the dropdown; it stays closed, whatever arrives late, until the user types, focuses the box
 * again or presses an arrow key.
 * Keyboard: ArrowDown / ArrowUp move through the options, Enter opens the active option (or searches
 * the typed text), Escape closes the dropdown.
 *
 * Recent searches: on the server for signed-in users (/api/recent-searches), in localStorage for
 * anonymous visitors. window.kbRecent = {add(query), clear(), list()}.
 */
(function () {
  "use strict";

  var input = document.getElementById("kb-q");
  if (!input) return;

  var MIN_CHARS = 3;
  var DEBOUNCE_MS = 300;
  var CACHE_MS = 30000;
  var LIMIT = 8;
  var RECENT_KEY = "kb.recentSearches";
  var RECENT_KEPT = 10;
  var RECENT_SHOWN = 5;

  var form = document.getElementById("kb-search-form");
  var dropdown = document.getElementById("kb-dropdown");
  var listbox = document.getElementById("kb-listbox");
  var status = document.getElementById("kb-preview-status");
  var clearButton = document.getElementById("kb-clear-q");
  var clearRecentButton = document.getElementById("kb-clear-recent");
  var recentFoot = dropdown.querySelector("[data-section='recent-foot']");
  var sections = {};
  var containers = {};
  ["recent", "preview", "topics"].forEach(function (name) {
    sections[name] = dropdown.querySelector("[data-section='" + name + "']");
    containers[name] = dropdown.querySelector("[data-options='" + name + "']");
  });
  var root = document.getElementById("kb-browse");
  var signedIn = Boolean(root && root.getAttribute("data-signed-in") === "1");

  function readJson(id, fallback) {
    var el = document.getElementById(id);
    if (!el) return fallback;
    try { return JSON.parse(el.textContent) || fallback; } catch (e) { return fallback; }
  }

  var topics = readJson("kb-topics-data", []);
  var recent = signedIn ? readJson("kb-recent-data", []) : readLocalRecent();
  var previewCache = new Map(); // lower-cased text -> {time, results}
  var preview = {text: "", results: [], loading: false};
  var timer = null; // the debounce
  var controller = null; // aborts the request in flight
  var latest = 0; // sequence number of the latest request: an answer to an older one is ignored
  var requested = ""; // the text of the request in flight
  var dismissed = false; // closed by the user (submit, Escape, blur): late answers must not reopen it
  var options = [];
  var active = -1;
  var optionSeq = 0;

  // --- recent searches ---
  function readLocalRecent() {
    try {
      var value = JSON.parse(window.localStorage.getItem(RECENT_KEY) || "[]");
      return Array.isArray(value) ? value.filter(function (v) { return typeof v === "string"; }) : [];
    } catch (e) {
      return [];
    }
  }

  function writeLocalRecent() {
    try { window.localStorage.setItem(RECENT_KEY, JSON.stringify(recent)); } catch (e) { /* not remembered */ }
  }

  function csrfToken() {
    var meta = document.querySelector("meta[name='csrf-token']");
    return meta ? meta.getAttribute("content") : "";
  }

  function sendRecent(method, body) {
    return fetch("/api/recent-searches", {
      method: method,
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrfToken()},
      body: body ? JSON.stringify(body) : undefined
    }).catch(function () { /* the list stays correct in this tab; the server catches up next time */ });
  }

  function addRecent(query) {
    query = (query || "").trim().replace(/\s+/g, " ").slice(0, 200);
    if (!query) return;
    var lower = query.toLowerCase();
    recent = [query].concat(recent.filter(function (q) { return q.toLowerCase() !== lower; })).slice(0, RECENT_KEPT);
    if (signedIn) sendRecent("POST", {query: query});
    else writeLocalRecent();
  }

  function clearRecent() {
    recent = [];
    if (signedIn) sendRecent("DELETE");
    else writeLocalRecent();
    render();
    input.focus();
  }

  window.kbRecent = {
    add: addRecent,
    clear: clearRecent,
    list: function () { return recent.slice(); }
  };

  // --- rendering ---
  function text() {
    return input.value.trim().replace(/\s+/g, " ");
  }

  function spanList(spans, length) {
    // [[start, end], ...] from the server: integers, clamped to the text, in order, never overlapping.
    if (!Array.isArray(spans)) return [];
    var out = [];
    spans.forEach(function (span) {
      if (!Array.isArray(span) || !Number.isInteger(span[0]) || !Number.isInteger(span[1])) return;
      var start = Math.max(0, span[0]);
      var end = Math.min(length, span[1]);
      if (end > start) out.push([start, end]);
    });
    out.sort(function (a, b) { return a[0] - b[0]; });
    return out;
  }

  function appendMarked(parent, label, spans) {
    // Text nodes and bare <mark> elements only: the title is never parsed as HTML. Offsets count code
    // points (the server's character offsets), not UTF-16 units.
    var chars = Array.from(label);
    var at = 0;
    spanList(spans, chars.length).forEach(function (span) {
      var start = Math.max(at, span[0]);
      if (span[1] <= start) return;
      if (start > at) parent.appendChild(document.createTextNode(chars.slice(at, start).join("")));
      var mark = document.createElement("mark");
      mark.textContent = chars.slice(start, span[1]).join("");
      parent.appendChild(mark);
      at = span[1];
    });
    if (at < chars.length) parent.appendChild(document.createTextNode(chars.slice(at).join("")));
  }

  function makeOption(kind, label, detail, value, spans, snippet, snippetSpans) {
    var el = document.createElement("div");
    el.className = "dd-option dd-option--" + kind;
    el.id = "kb-opt-" + (++optionSeq);
    el.setAttribute("role", "option");
    el.setAttribute("aria-selected", "false");
    el.setAttribute("data-kind", kind);
    el.setAttribute("data-value", value);
    var main = document.createElement("span");
    main.className = "dd-option__label";
    appendMarked(main, label, spans); // text only: titles are never parsed as HTML
    el.appendChild(main);
    if (snippet) {
      // a match in the body: the passage around the first typed word, marked the same way (text only)
      var passage = document.createElement("span");
      passage.className = "dd-option__snippet";
      appendMarked(passage, snippet, snippetSpans);
      el.appendChild(passage);
    }
    if (detail) {
      var small = document.createElement("span");
      small.className = "dd-option__detail";
      small.textContent = detail;
      el.appendChild(small);
    }
    options.push(el);
    return el;
  }

  var LABELS = {qa: "Q&A", case_study: "Case study"};

  function humanize(value) {
    if (!value) return "";
    if (LABELS[value]) return LABELS[value];
    var s = String(value).replace(/_/g, " ");
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  function note(message) {
    var el = document.createElement("div");
    el.className = "dd-note";
    el.textContent = message;
    return el;
  }

  function render() {
    var typed = text();
    var lower = typed.toLowerCase();
    options = [];
    active = -1;
    input.removeAttribute("aria-activedescendant");
    Object.keys(containers).forEach(function (name) { containers[name].textContent = ""; });

    var shownRecent = recent.filter(function (q) {
      return !lower || (q.toLowerCase().indexOf(lower) !== -1 && q.toLowerCase() !== lower);
    }).slice(0, RECENT_SHOWN);
    shownRecent.forEach(function (q) { containers.recent.appendChild(makeOption("recent", q, "", q)); });
    sections.recent.hidden = shownRecent.length === 0;
    recentFoot.hidden = recent.length === 0;

    var previewActive = typed.length >= MIN_CHARS;
    if (previewActive) {
      if (preview.results.length) {
        preview.results.forEach(function (r) {
          var detail = [humanize(r.content_type), humanize(r.primary_domain)].filter(Boolean).join(" · ");
          containers.preview.appendChild(makeOption("preview", String(r.title || ""), detail, r.url,
            r.title_spans, r.match === "content" ? String(r.snippet || "") : "", r.snippet_spans));
        });
      } else if (preview.loading) {
        containers.preview.appendChild(note("Searching…"));
      } else if (preview.text.toLowerCase() === lower) {
        containers.preview.appendChild(note("No matching items. Press Enter to search everything."));
      }
    }
    sections.preview.hidden = !previewActive || !containers.preview.childNodes.length;

    var showTopics = !(preview.loading || (previewActive && preview.results.length)) && topics.length > 0;
    if (showTopics) {
      topics.forEach(function (t) { containers.topics.appendChild(makeOption("topic", t, "", t)); });
    }
    sections.topics.hidden = !showTopics;
    listbox.setAttribute("aria-busy", preview.loading ? "true" : "false");
  }

  function isOpen() {
    return !dropdown.hidden;
  }

  function open() {
    render();
    var empty = sections.recent.hidden && sections.preview.hidden && sections.topics.hidden;
    dropdown.hidden = empty;
    input.setAttribute("aria-expanded", empty ? "false" : "true");
  }

  function close() {
    dismissed = true;
    dropdown.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    active = -1;
  }

  function refresh() {
    if (!dismissed && (document.activeElement === input || isOpen())) open();
  }

  function reopen() {
    // The user asks for the dropdown again (focus, an arrow key). Preview rows for other text than the
    // box holds (it changed without typing: Back, a picked topic) are not shown; typing fetches anew.
    dismissed = false;
    if (!timer && !controller && cacheKey(preview.text) !== cacheKey(text())) {
      preview = {text: "", results: [], loading: false};
    }
    open();
  }

  function setActive(index) {
    if (!options.length) return;
    if (active >= 0 && options[active]) options[active].setAttribute("aria-selected", "false");
    active = (index + options.length) % options.length;
    var el = options[active];
    el.setAttribute("aria-selected", "true");
    input.setAttribute("aria-activedescendant", el.id);
    el.scrollIntoView({block: "nearest"});
  }

  // --- searching ---
  function submitQuery(query) {
    query = (query || "").trim();
    cancelPreview();
    close();
    if (query) addRecent(query);
    if (window.kbBrowse) {
      window.kbBrowse.setQuery(query);
    } else {
      window.location.assign("/browse" + (query ? "?q=" + encodeURIComponent(query) : ""));
    }
  }

  function pick(el) {
    var kind = el.getAttribute("data-kind");
    var value = el.getAttribute("data-value");
    if (kind === "preview") {
      cancelPreview();
      close();
      window.location.assign(value);
      return;
    }
    input.value = value;
    submitQuery(value);
  }

  // --- live preview ---
  function cacheKey(value) {
    return value.toLowerCase();
  }

  function cancelPreview() {
    // No pending request, none in flight, and any answer still on its way is ignored (sequence number).
    clearTimeout(timer);
    timer = null;
    if (controller) controller.abort();
    controller = null;
    requested = "";
    latest += 1;
    var kept = cacheKey(preview.text) === cacheKey(text()) ? preview.results : [];
    preview = {text: kept.length ? preview.text : "", results: kept, loading: false};
    listbox.setAttribute("aria-busy", "false");
  }

  function schedulePreview() {
    var typed = text();
    clearTimeout(timer);
    timer = null;
    if (controller && cacheKey(requested) !== cacheKey(typed)) {
      // The text changed: the answer in flight is for other text, so it is cancelled, not shown later.
      controller.abort();
      controller = null;
      requested = "";
      latest += 1;
      if (preview.loading) preview = {text: preview.text, results: preview.results, loading: false};
    }
    if (typed.length < MIN_CHARS) {
      preview = {text: typed, results: [], loading: false};
      status.textContent = "";
      refresh();
      return;
    }
    if (controller) return; // the request in flight is for this very text
    var hit = previewCache.get(cacheKey(typed));
    if (hit && Date.now() - hit.time < CACHE_MS) {
      preview = {text: typed, results: hit.results, loading: false};
      announce();
      refresh();
      return;
    }
    timer = setTimeout(function () { timer = null; fetchPreview(typed); }, DEBOUNCE_MS);
  }

  function announce() {
    var n = preview.results.length;
    status.textContent = n ? n + (n === 1 ? " suggestion" : " suggestions") + " available" : "No suggestions";
  }

  function fetchPreview(typed) {
    if (controller) controller.abort();
    var own = new AbortController();
    controller = own;
    requested = typed;
    var mine = ++latest;

    function done() {
      // This request is over; its answer counts only if it is still the latest request and the box still
      // holds the text it asked about (a submit, or a change of the text, makes it stale).
      if (controller === own) {
        controller = null;
        requested = "";
      }
      if (mine !== latest) return false;
      if (cacheKey(typed) === cacheKey(text())) return true;
      preview = {text: preview.text, results: preview.results, loading: false};
      return false;
    }

    function stopLoading() {
      preview = {text: preview.text, results: preview.results, loading: false};
      refresh();
    }

    preview = {text: preview.text, results: preview.results, loading: true};
    refresh();
    var url = "/api/search/preview?q=" + encodeURIComponent(typed) + "&limit=" + LIMIT;
    fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin", signal: own.signal})
      .then(function (response) {
        if (response.status === 429) {
          // Rate limited: keep showing what we have, quietly.
          if (done()) stopLoading();
          return;
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json().then(function (data) {
          if (!done()) return;
          var found = Array.isArray(data.results) ? data.results : [];
          previewCache.set(cacheKey(typed), {time: Date.now(), results: found});
          preview = {text: typed, results: found, loading: false};
          announce();
          refresh();
        });
      })
      .catch(function (error) {
        if (error && error.name === "AbortError") return; // cancelled by a newer request or a submit
        if (done()) stopLoading();
      });
  }

  // --- events ---
  input.addEventListener("input", function () {
    if (clearButton) clearButton.hidden = !input.value;
    dismissed = false;
    schedulePreview();
    open();
  });
  input.addEventListener("focus", reopen);
  input.addEventListener("blur", function () {
    // Let a click inside the dropdown land first (mousedown there keeps the focus anyway).
    setTimeout(function () { if (document.activeElement !== input) close(); }, 0);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      if (!isOpen()) reopen();
      if (!options.length) return;
      event.preventDefault();
      setActive(active === -1 ? (event.key === "ArrowDown" ? 0 : options.length - 1)
        : active + (event.key === "ArrowDown" ? 1 : -1));
    } else if (event.key === "Enter") {
      event.preventDefault();
      if (isOpen() && active >= 0 && options[active]) pick(options[active]);
      else submitQuery(input.value);
    } else if (event.key === "Escape") {
      if (isOpen()) {
        event.preventDefault();
        close();
      }
    }
  });
  dropdown.addEventListener("mousedown", function (event) {
    event.preventDefault(); // keep the focus in the input
  });
  dropdown.addEventListener("click", function (event) {
    var option = event.target.closest("[role='option']");
    if (option) pick(option);
  });
  if (clearRecentButton) clearRecentButton.addEventListener("click", clearRecent);
  if (clearButton) {
    clearButton.addEventListener("click", function () {
      input.value = "";
      clearButton.hidden = true;
      schedulePreview();
      submitQuery("");
      input.focus();
    });
  }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    submitQuery(input.value);
  });
  document.addEventListener("click", function (event) {
    if (!form.contains(event.target)) close();
  });
})();
