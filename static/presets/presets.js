/* Presets bar on /browse: chips for system and saved filter presets, "Save" and "Manage".
 *
 * Fills <div id="presets-bar" data-presets-api="/api/presets/">. Signed-in users' presets live on the
 * server (JSON API, session + CSRF); anonymous visitors' presets live in localStorage and are offered
 * for import into the account after sign-in (the server merges them without duplicates).
 *
 * Applying a preset goes through window.kbBrowse.applyParams({name: value | [values]}) when the browse
 * script provides it (it keeps q, from_bid and sort), otherwise the page navigates. The chips follow
 * URL changes through browse.js's "kb:paramschange" event and popstate.
 */
(function () {
  "use strict";

  var LOCAL_KEY = "kb.presets.v1";
  var DISMISS_KEY = "kb.presets.importDismissed";
  var NAME_MAX = 40;
  var TRUE_WORDS = ["1", "true", "yes", "on", "t", "y"];
  var FALSE_WORDS = ["0", "false", "no", "off", "f", "n"];

  var root = document.getElementById("presets-bar");
  if (!root || root.dataset.presetsReady) return;
  root.dataset.presetsReady = "1";
  var api = root.dataset.presetsApi || "/api/presets/";

  var state = {
    loaded: false,
    authenticated: false,
    system: [],
    mine: [],          // the user's presets (server) or this browser's (anonymous)
    schema: {},        // filter name -> {kind, default}
    sticky: ["q", "from_bid", "sort", "order"],
    limits: { name_max_chars: NAME_MAX },
    managing: false,
    renaming: null,    // id of the preset being renamed
    lastDeleted: null, // {preset, local}
  };

  /* ---------- small helpers ---------- */

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key === "text") node.textContent = value;
      else if (key === "className") node.className = value;
      else if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    });
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }

  function cleanName(raw) {
    return String(raw || "").replace(/[\u200b-\u200f\u2060\ufeff]/g, "").replace(/\s+/g, " ").trim();
  }

  function nameError(name) {
    if (!name) return "Give the preset a name (1–" + NAME_MAX + " characters).";
    if (name.length > NAME_MAX) return "The name is " + name.length + " characters long; shorten it to " + NAME_MAX + " or fewer.";
    return "";
  }

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  /* Every call resolves to {ok, status, body}; a network failure is status 0 with a readable message. */
  function request(method, path, body) {
    var options = { method: method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method !== "GET") options.headers["X-CSRFToken"] = csrfToken();
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(api + path, options).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        return { ok: response.ok, status: response.status, body: data };
      });
    }, function () {
      return { ok: false, status: 0, body: { error: { message: "Could not reach the server; check your connection and try again." } } };
    });
  }

  function errorOf(result) {
    var error = (result.body && result.body.error) || {};
    return { message: error.message || "Something went wrong (" + result.status + "); try again.", field: error.field || "" };
  }

  /* ---------- parameters ---------- */

  function currentParams() { return new URLSearchParams(window.location.search); }

  function canonicalValue(kind, values) {
    values = values.map(function (v) { return String(v).trim(); }).filter(function (v) { return v !== ""; });
    if (kind === "multi") {
      var seen = {};
      var out = [];
      values.forEach(function (v) {
        v.split(",").forEach(function (part) {
          part = part.replace(/\s+/g, " ").trim();
          var key = part.toLowerCase();
          if (part && !seen[key]) { seen[key] = true; out.push(key); }
        });
      });
      return out.sort();
    }
    if (!values.length) return null;
    var last = values[values.length - 1];
    if (kind === "bool") {
      var word = last.toLowerCase();
      if (TRUE_WORDS.indexOf(word) >= 0) return "1";
      if (FALSE_WORDS.indexOf(word) >= 0) return "0";
      return word;
    }
    if (kind === "int") return String(parseInt(last, 10));
    return last.toLowerCase();
  }

  /* The filters of a parameter set, as comparable text ("" when no filter is set). */
  function identity(getAll) {
    var parts = [];
    Object.keys(state.schema).sort().forEach(function (name) {
      var spec = state.schema[name];
      var value = canonicalValue(spec.kind, getAll(name));
      if (value === null || (Array.isArray(value) && !value.length)) return;
      if (!Array.isArray(value) && spec.default !== null && value === String(spec.default)) return;
      parts.push(name + "=" + (Array.isArray(value) ? value.join("\u0001") : value));
    });
    return parts.join("&");
  }

  function urlIdentity(params) { return identity(function (name) { return params.getAll(name); }); }

  function presetIdentity(preset) {
    return identity(function (name) {
      var value = preset.params[name];
      if (value === undefined || value === null) return [];
      return Array.isArray(value) ? value : [value];
    });
  }

  /* Only the filter parameters of the URL, as {name: [values]} (what a saved preset holds). */
  function currentFilters() {
    var params = currentParams();
    var out = {};
    Object.keys(state.schema).forEach(function (name) {
      var values = params.getAll(name).filter(function (v) { return v !== ""; });
      if (values.length) out[name] = values;
    });
    return out;
  }

  function nextParams(preset) {
    var current = currentParams();
    var next = new URLSearchParams();
    state.sticky.forEach(function (key) {
      current.getAll(key).forEach(function (value) { if (value !== "") next.append(key, value); });
    });
    if (preset) {
      Object.keys(preset.params).sort().forEach(function (key) {
        var value = preset.params[key];
        (Array.isArray(value) ? value : [value]).forEach(function (v) { next.append(key, String(v)); });
      });
    }
    return next;
  }

  /* Apply a preset (or clear the filters with null): the filters are replaced, q / from_bid / sort kept. */
  function go(preset) {
    if (window.kbBrowse && typeof window.kbBrowse.applyParams === "function") {
      var params = {};
      if (preset) {
        Object.keys(preset.params).forEach(function (key) {
          var value = preset.params[key];
          params[key] = Array.isArray(value) ? value.slice() : value;
        });
      }
      window.kbBrowse.applyParams(params);
      render();
      return;
    }
    var query = nextParams(preset).toString();
    window.location.assign(window.location.pathname + (query ? "?" + query : ""));
  }

  /* ---------- this browser's presets (anonymous visitors) ---------- */

  function localLoad() {
    try {
      var data = JSON.parse(window.localStorage.getItem(LOCAL_KEY) || "[]");
      return Array.isArray(data) ? data.filter(function (p) { return p && p.name && p.params; }) : [];
    } catch (e) { return []; }
  }

  function localSave(list) {
    try {
      if (list.length) window.localStorage.setItem(LOCAL_KEY, JSON.stringify(list));
      else window.localStorage.removeItem(LOCAL_KEY);
      return true;
    } catch (e) { return false; }
  }

  function localId() { return "local-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 8); }

  function nameTaken(name, exceptId) {
    var lower = name.toLowerCase();
    return state.system.concat(state.mine).filter(function (p) {
      return p.name.toLowerCase() === lower && String(p.id) !== String(exceptId);
    })[0];
  }

  /* ---------- loading ---------- */

  function load() {
    return request("GET", "").then(function (result) {
      if (!result.ok) {
        state.loaded = false;
        status(errorOf(result).message, true);
        return;
      }
      var body = result.body;
      state.loaded = true;
      state.authenticated = !!body.authenticated;
      state.schema = body.filters || {};
      state.sticky = body.sticky_keys || state.sticky;
      state.limits = body.limits || state.limits;
      NAME_MAX = state.limits.name_max_chars || NAME_MAX;
      state.system = body.presets.filter(function (p) { return p.is_system; });
      state.mine = state.authenticated ? body.presets.filter(function (p) { return !p.is_system; }) : localLoad();
      render();
      offerImport();
    });
  }

  /* ---------- rendering ---------- */

  var bar, chipList, saveButton, manageButton, statusLine, managePanel, importBox, dialog;

  function build() {
    chipList = el("ul", { className: "presets__chips", "aria-label": "Filter presets" });
    saveButton = el("button", { type: "button", className: "presets__action", hidden: true, onclick: openDialog, text: "Save filters…" });
    manageButton = el("button", {
      type: "button", className: "presets__action", "aria-expanded": "false", "aria-controls": "presets-manage",
      onclick: toggleManage, text: "Manage",
    });
    statusLine = el("p", { className: "presets__status", role: "status", "aria-live": "polite" });
    managePanel = el("div", { className: "presets__manage", id: "presets-manage", hidden: true });
    importBox = el("div", { className: "presets__import", hidden: true, role: "region", "aria-label": "Import presets" });
    bar = el("div", { className: "presets", role: "group", "aria-label": "Presets" }, [
      el("span", { className: "presets__label", text: "Presets" }), chipList, saveButton, manageButton,
    ]);
    root.appendChild(bar);
    root.appendChild(importBox);
    root.appendChild(managePanel);
    root.appendChild(statusLine);
    buildDialog();
  }

  function render() {
    if (!state.loaded) return;
    var here = urlIdentity(currentParams());
    chipList.textContent = "";
    state.system.concat(state.mine).forEach(function (preset) {
      var active = here !== "" && presetIdentity(preset) === here;
      var chip = el("button", {
        type: "button",
        className: "preset-chip" + (preset.is_system ? " preset-chip--system" : ""),
        "aria-pressed": active ? "true" : "false",
        "data-preset-id": String(preset.id),
        title: active ? "Clear these filters" : "Apply: " + describe(preset),
        onclick: function () { go(active ? null : preset); },
        text: preset.name,
      });
      chipList.appendChild(el("li", {}, [chip]));
    });
    saveButton.hidden = here === "";  // offered whenever filters are set
    manageButton.hidden = !state.mine.length && !state.managing;
    if (state.managing) renderManage();
  }

  function describe(preset) {
    return Object.keys(preset.params).sort().map(function (key) {
      var value = preset.params[key];
      return key + ": " + (Array.isArray(value) ? value.join(", ") : value);
    }).join("; ");
  }

  var statusTimer = null;
  function status(message, isError, action) {
    statusLine.textContent = "";
    statusLine.classList.toggle("presets__status--error", !!isError);
    if (message) statusLine.appendChild(document.createTextNode(message + " "));
    if (action) statusLine.appendChild(el("button", { type: "button", className: "link-button presets__undo", onclick: action.run, text: action.label }));
    window.clearTimeout(statusTimer);
    if (message && !action && !isError) statusTimer = window.setTimeout(function () { statusLine.textContent = ""; }, 6000);
  }

  /* ---------- save dialog ---------- */

  var nameInput, nameHint, nameErrorLine, formError;

  function buildDialog() {
    nameInput = el("input", { id: "preset-name", name: "name", type: "text", autocomplete: "off", "aria-describedby": "preset-name-hint preset-name-error", required: true });
    nameHint = el("span", { id: "preset-name-hint", className: "presets__hint" });
    nameErrorLine = el("p", { id: "preset-name-error", className: "presets__error", role: "alert" });
    formError = el("p", { className: "presets__error", role: "alert" });
    nameInput.addEventListener("input", function () {
      var length = cleanName(nameInput.value).length;
      nameHint.textContent = length + "/" + NAME_MAX;
      nameHint.classList.toggle("presets__hint--over", length > NAME_MAX);
      showNameError("");
    });
    var form = el("form", { className: "presets__form", novalidate: true, onsubmit: function (event) { event.preventDefault(); submitSave(); } }, [
      el("h2", { className: "presets__title", id: "preset-dialog-title", text: "Save these filters" }),
      el("label", { for: "preset-name", text: "Name" }),
      nameInput, nameHint, nameErrorLine, formError,
      el("div", { className: "presets__buttons" }, [
        el("button", { type: "submit", className: "button button--small", text: "Save" }),
        el("button", { type: "button", className: "button button--ghost button--small", onclick: closeDialog, text: "Cancel" }),
      ]),
    ]);
    dialog = el("dialog", { className: "presets__dialog", "aria-labelledby": "preset-dialog-title" }, [form]);
    root.appendChild(dialog);
  }

  function showNameError(message) {
    nameErrorLine.textContent = message;
    nameInput.setAttribute("aria-invalid", message ? "true" : "false");
  }

  function openDialog() {
    nameInput.value = "";
    nameHint.textContent = "0/" + NAME_MAX;
    showNameError("");
    formError.textContent = "";
    if (typeof dialog.showModal === "function") dialog.showModal(); else dialog.setAttribute("open", "");
    nameInput.focus();
  }

  function closeDialog() {
    if (typeof dialog.close === "function") dialog.close(); else dialog.removeAttribute("open");
    saveButton.focus();
  }

  function submitSave() {
    var name = cleanName(nameInput.value);
    var problem = nameError(name);
    if (problem) { showNameError(problem); nameInput.focus(); return; }
    var filters = currentFilters();
    if (state.authenticated) {
      request("POST", "", { name: name, params: filters }).then(function (result) {
        if (!result.ok) return saveFailed(result);
        state.mine.push(result.body.preset);
        closeDialog();
        render();
        status("Saved “" + result.body.preset.name + "”.");
      });
      return;
    }
    request("POST", "validate/", { name: name, params: filters }).then(function (result) {
      if (!result.ok) return saveFailed(result);
      var clean = result.body.name;
      var holder = nameTaken(clean);
      if (holder) { showNameError("“" + holder.name + "” is already a preset; choose another name."); return; }
      var preset = { id: localId(), name: clean, params: result.body.params, is_system: false, created_at: new Date().toISOString() };
      state.mine.push(preset);
      if (!localSave(state.mine)) { state.mine.pop(); formError.textContent = "This browser cannot store presets (storage is full or disabled)."; return; }
      closeDialog();
      render();
      status("Saved “" + clean + "” in this browser. Sign in to keep presets in your account.");
    });
  }

  function saveFailed(result) {
    var error = errorOf(result);
    if (error.field === "name") { showNameError(error.message); nameInput.focus(); }
    else formError.textContent = error.message;
  }

  /* ---------- manage: rename, delete, undo ---------- */

  function toggleManage() {
    state.managing = !state.managing;
    state.renaming = null;
    manageButton.setAttribute("aria-expanded", state.managing ? "true" : "false");
    managePanel.hidden = !state.managing;
    if (state.managing) renderManage();
  }

  function renderManage() {
    managePanel.textContent = "";
    managePanel.appendChild(el("h2", { className: "presets__title", text: state.authenticated ? "Your presets" : "Presets saved in this browser" }));
    if (!state.mine.length) {
      managePanel.appendChild(el("p", { className: "muted", text: "No saved presets yet. Set some filters and choose “Save filters…”." }));
      return;
    }
    var list = el("ul", { className: "presets__list" });
    state.mine.forEach(function (preset) { list.appendChild(manageRow(preset)); });
    managePanel.appendChild(list);
  }

  function manageRow(preset) {
    var id = String(preset.id);
    if (state.renaming === id) {
      var input = el("input", { type: "text", value: preset.name, "aria-label": "New name for " + preset.name, "aria-describedby": "rename-error-" + id, className: "presets__rename" });
      var error = el("span", { id: "rename-error-" + id, className: "presets__error", role: "alert" });
      var save = function () { submitRename(preset, input, error); };
      var cancel = function () { state.renaming = null; renderManage(); };
      input.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { event.preventDefault(); save(); }
        if (event.key === "Escape") { event.preventDefault(); cancel(); }
      });
      window.setTimeout(function () { input.focus(); input.select(); }, 0);
      return el("li", { className: "presets__row", "data-preset-id": id }, [
        input,
        el("button", { type: "button", className: "button button--small", onclick: save, text: "Save name" }),
        el("button", { type: "button", className: "button button--ghost button--small", onclick: cancel, text: "Cancel" }),
        error,
      ]);
    }
    return el("li", { className: "presets__row", "data-preset-id": id }, [
      el("span", { className: "presets__name", text: preset.name }),
      el("span", { className: "presets__params muted", text: describe(preset) }),
      el("button", { type: "button", className: "button button--ghost button--small", "aria-label": "Rename " + preset.name,
        onclick: function () { state.renaming = id; renderManage(); }, text: "Rename" }),
      el("button", { type: "button", className: "button button--ghost button--small", "aria-label": "Delete " + preset.name,
        onclick: function () { remove(preset); }, text: "Delete" }),
    ]);
  }

  function replaceMine(preset) {
    state.mine = state.mine.map(function (p) { return String(p.id) === String(preset.id) ? preset : p; });
  }

  function submitRename(preset, input, errorLine) {
    var name = cleanName(input.value);
    var problem = nameError(name);
    if (problem) { errorLine.textContent = problem; input.focus(); return; }
    if (!state.authenticated) {
      var holder = nameTaken(name, preset.id);
      if (holder) { errorLine.textContent = "“" + holder.name + "” is already a preset; choose another name."; return; }
      replaceMine(Object.assign({}, preset, { name: name }));
      localSave(state.mine);
      state.renaming = null;
      render();
      status("Renamed to “" + name + "”.");
      return;
    }
    request("PATCH", preset.id + "/", { name: name }).then(function (result) {
      if (!result.ok) {
        errorLine.textContent = errorOf(result).message;
        if (result.status === 404) refreshSoon();  // another tab deleted it
        return;
      }
      replaceMine(result.body.preset);
      state.renaming = null;
      render();
      status("Renamed to “" + result.body.preset.name + "”.");
    });
  }

  function remove(preset) {
    var done = function () {
      state.mine = state.mine.filter(function (p) { return String(p.id) !== String(preset.id); });
      state.lastDeleted = preset;
      render();
      status("Deleted “" + preset.name + "”.", false, { label: "Undo", run: undo });
    };
    if (!state.authenticated) { localSave(state.mine.filter(function (p) { return p.id !== preset.id; })); done(); return; }
    request("DELETE", preset.id + "/").then(function (result) {
      if (!result.ok && result.status !== 404) { status(errorOf(result).message, true); return; }
      done();
    });
  }

  function undo() {
    var preset = state.lastDeleted;
    if (!preset) return;
    var restored = function (back) {
      state.lastDeleted = null;
      state.mine.push(back);
      state.mine.sort(function (a, b) { return String(a.created_at).localeCompare(String(b.created_at)); });
      render();
      status("Restored “" + back.name + "”.");
    };
    if (!state.authenticated) {
      if (nameTaken(preset.name)) { status("Another preset is now called “" + preset.name + "”; rename it first, then undo.", true, { label: "Undo", run: undo }); return; }
      localSave(state.mine.concat([preset]));
      restored(preset);
      return;
    }
    request("POST", preset.id + "/restore/").then(function (result) {
      if (!result.ok) { status(errorOf(result).message, true, result.status === 409 ? { label: "Undo", run: undo } : null); return; }
      restored(result.body.preset);
    });
  }

  /* ---------- import on sign-in ---------- */

  function offerImport() {
    importBox.textContent = "";
    importBox.hidden = true;
    if (!state.authenticated) return;
    var local = localLoad();
    var dismissed = false;
    try { dismissed = window.sessionStorage.getItem(DISMISS_KEY) === "1"; } catch (e) { /* private mode */ }
    if (!local.length || dismissed) return;
    var count = local.length === 1 ? "1 preset is" : local.length + " presets are";
    importBox.appendChild(el("p", { text: count + " saved in this browser. Import into your account? Duplicates are skipped." }));
    importBox.appendChild(el("button", { type: "button", className: "button button--small", onclick: function () { runImport(local); }, text: "Import" }));
    importBox.appendChild(el("button", { type: "button", className: "button button--ghost button--small", text: "Not now", onclick: function () {
      try { window.sessionStorage.setItem(DISMISS_KEY, "1"); } catch (e) { /* ignore */ }
      importBox.hidden = true;
    } }));
    importBox.hidden = false;
  }

  function runImport(local) {
    request("POST", "import/", { presets: local.map(function (p) { return { name: p.name, params: p.params }; }) }).then(function (result) {
      if (!result.ok) { status(errorOf(result).message, true); return; }
      localSave([]);
      importBox.hidden = true;
      state.mine = result.body.presets.filter(function (p) { return !p.is_system; });
      render();
      var created = result.body.created.length;
      var skipped = result.body.skipped.length;
      status("Imported " + created + " preset" + (created === 1 ? "" : "s") + (skipped ? "; " + skipped + " skipped (already in your presets or not valid)." : "."));
    });
  }

  /* ---------- keeping up with the URL and other tabs ---------- */

  var refreshTimer = null;
  function refreshSoon() {
    window.clearTimeout(refreshTimer);
    refreshTimer = window.setTimeout(function () {
      if (state.renaming) return;  // do not throw away a name being typed
      load();
    }, 150);
  }

  window.addEventListener("popstate", render);
  document.addEventListener("kb:paramschange", render);  // fired by browse.js after each URL change
  document.addEventListener("visibilitychange", function () { if (!document.hidden) refreshSoon(); });
  window.addEventListener("storage", function (event) {
    if (event.key === LOCAL_KEY && !state.authenticated) { state.mine = localLoad(); render(); }
  });

  build();
  load();
  window.kbPresets = { reload: load, render: render };
})();
