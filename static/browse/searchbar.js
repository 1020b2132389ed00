/*
 * The inline search bar of /browse: a combobox whose dropdown shows recent searches, a live preview
 * (GET /api/search/preview) and popular topics.
 *
 * Live preview rules: nothing is requested under 3 characters; requests wait for 300 ms of quiet
 * typing; a newer request aborts the one in flight (AbortController) and only the latest answer
 * renders; answers are cached for 30 s; a 429 keeps the results already shown (no error toast).
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
  var timer = null;
  var controller = null;
  var latest = 0;
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

  function makeOption(kind, label, detail, value) {
    var el = document.createElement("div");
    el.className = "dd-option dd-option--" + kind;
    el.id = "kb-opt-" + (++optionSeq);
    el.setAttribute("role", "option");
    el.setAttribute("aria-selected", "false");
    el.setAttribute("data-kind", kind);
    el.setAttribute("data-value", value);
    var main = document.createElement("span");
    main.className = "dd-option__label";
    main.textContent = label; // text only: titles are never parsed as HTML
    el.appendChild(main);
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
          containers.preview.appendChild(makeOption("preview", r.title, detail, r.url));
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
    dropdown.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    active = -1;
  }

  function refresh() {
    if (document.activeElement === input || isOpen()) open();
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

  function schedulePreview() {
    var typed = text();
    clearTimeout(timer);
    if (typed.length < MIN_CHARS) {
      if (controller) controller.abort();
      latest += 1;
      preview = {text: typed, results: [], loading: false};
      status.textContent = "";
      refresh();
      return;
    }
    var hit = previewCache.get(cacheKey(typed));
    if (hit && Date.now() - hit.time < CACHE_MS) {
      if (controller) controller.abort();
      latest += 1;
      preview = {text: typed, results: hit.results, loading: false};
      announce();
      refresh();
      return;
    }
    timer = setTimeout(function () { fetchPreview(typed); }, DEBOUNCE_MS);
  }

  function announce() {
    var n = preview.results.length;
    status.textContent = n ? n + (n === 1 ? " suggestion" : " suggestions") + " available" : "No suggestions";
  }

  function fetchPreview(typed) {
    if (controller) controller.abort();
    controller = new AbortController();
    var mine = ++latest;
    preview = {text: preview.text, results: preview.results, loading: true};
    refresh();
    var url = "/api/search/preview?q=" + encodeURIComponent(typed) + "&limit=" + LIMIT;
    fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin", signal: controller.signal})
      .then(function (response) {
        if (mine !== latest) return;
        if (response.status === 429) {
          // Rate limited: keep showing what we have, quietly.
          preview = {text: preview.text, results: preview.results, loading: false};
          refresh();
          return;
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json().then(function (data) {
          if (mine !== latest) return;
          var found = Array.isArray(data.results) ? data.results : [];
          previewCache.set(cacheKey(typed), {time: Date.now(), results: found});
          preview = {text: typed, results: found, loading: false};
          announce();
          refresh();
        });
      })
      .catch(function (error) {
        if (error && error.name === "AbortError") return;
        if (mine !== latest) return;
        preview = {text: preview.text, results: preview.results, loading: false};
        refresh();
      });
  }

  // --- events ---
  input.addEventListener("input", function () {
    if (clearButton) clearButton.hidden = !input.value;
    schedulePreview();
    open();
  });
  input.addEventListener("focus", open);
  input.addEventListener("blur", function () {
    // Let a click inside the dropdown land first (mousedown there keeps the focus anyway).
    setTimeout(function () { if (document.activeElement !== input) close(); }, 0);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      if (!isOpen()) open();
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
