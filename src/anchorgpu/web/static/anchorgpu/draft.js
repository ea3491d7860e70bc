// The draft keeper: what a customer types into a form marked data-draft is kept in this tab's
// sessionStorage while they type, so that a language switch, a refusal page (503, an expired session),
// a log-in on the way or a reload does not lose it. The key is the page's path without its language
// prefix (/pt/checkout/h200/ and /ko/checkout/h200/ share one draft). On load a draft is put back only
// into fields that are empty or still show what the page showed when the draft was written: a value
// the server filled in since (from the address, or a form sent back with what was typed) is left as
// it is. Never kept: hidden fields (the CSRF token, the form's submission key), passwords, and any
// value holding a private key (the same markers the server refuses). A page marked data-draft-done
// (the order page) drops the draft of the form that was just sent.
(function () {
  "use strict";
  var PREFIX = "anchorgpu:draft:";
  var SENT = "anchorgpu:draft-sent";
  var PRIVATE = /PRIVATE KEY|PuTTY-User-Key-File/i;
  var SKIPPED = /csrf|password|token|secret/i;

  function store() {
    try { return window.sessionStorage; } catch (e) { return null; }  // storage blocked: keep nothing
  }

  // One draft per signed-in customer and page: the form's data-draft names its owner, so a customer who
  // signs in after another in the same tab never gets the other's company, address or keys put back.
  function draftKey(path, owner) {
    var parts = path.split("/");  // ["", "pt", "checkout", ...]
    if (/^[a-z]{2,3}(-[a-z0-9]{2,8})*$/i.test(parts[1] || "")) { parts.splice(1, 1); }
    return PREFIX + (owner || "") + ":" + parts.join("/");
  }

  function ownerOf(form) { return form.getAttribute("data-draft") || ""; }

  function forgetAll() {
    var storage = store();
    if (!storage) { return; }
    Object.keys(storage).forEach(function (key) {
      if (key.indexOf(PREFIX) === 0 || key === SENT) { storage.removeItem(key); }
    });
  }

  function kept(el) {
    if (!el.name || el.disabled) { return false; }
    var type = (el.type || "").toLowerCase();
    if (["hidden", "password", "file", "submit", "button", "reset", "image"].indexOf(type) >= 0) { return false; }
    return !SKIPPED.test(el.name) && el.autocomplete !== "current-password" && el.autocomplete !== "new-password";
  }

  function entryName(el) {
    return el.type === "checkbox" ? el.name + "\u0000" + el.value : el.name;
  }

  function initialOf(el, form) {
    if (el.type === "checkbox") { return el.defaultChecked; }
    if (el.type === "radio") {
      var first = "";
      form.querySelectorAll("input[type=radio]").forEach(function (r) {
        if (r.name === el.name && r.defaultChecked) { first = r.value; }
      });
      return first;
    }
    if (el.tagName === "SELECT") {
      var chosen = Array.prototype.filter.call(el.options, function (o) { return o.defaultSelected; });
      return chosen.length ? chosen[0].value : (el.options.length ? el.options[0].value : "");
    }
    return el.defaultValue;
  }

  function valueOf(el, form) {
    if (el.type === "checkbox") { return el.checked; }
    if (el.type === "radio") {
      var on = form.querySelector("input[type=radio][name='" + CSS.escape(el.name) + "']:checked");
      return on ? on.value : "";
    }
    return el.value;
  }

  function save(form) {
    var storage = store();
    if (!storage) { return; }
    var draft = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!kept(el)) { return; }
      var value = valueOf(el, form);
      if (typeof value === "string" && PRIVATE.test(value)) { return; }  // never written anywhere
      draft[entryName(el)] = {v: value, i: initialOf(el, form)};
    });
    storage.setItem(draftKey(location.pathname, ownerOf(form)), JSON.stringify(draft));
  }

  function read(key) {
    var storage = store();
    if (!storage) { return null; }
    try { return JSON.parse(storage.getItem(key) || "null"); } catch (e) { return null; }
  }

  function restore(form) {
    var draft = read(draftKey(location.pathname, ownerOf(form)));
    if (!draft) { return false; }
    var changed = null, done = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!kept(el)) { return; }
      var entry = draft[entryName(el)];
      if (!entry || done[entryName(el)]) { return; }
      done[entryName(el)] = true;
      if (typeof entry.v === "string" && PRIVATE.test(entry.v)) { return; }
      var now = valueOf(el, form);
      if (now === entry.v || !(now === "" || now === entry.i)) { return; }  // the same, or the page's own
      if (el.type === "checkbox") {
        el.checked = entry.v === true;
      } else if (el.type === "radio") {
        form.querySelectorAll("input[type=radio]").forEach(function (r) {
          if (r.name === el.name) { r.checked = r.value === entry.v; }
        });
      } else if (el.tagName === "SELECT") {
        if (!Array.prototype.some.call(el.options, function (o) { return o.value === entry.v; })) { return; }
        el.value = entry.v;
      } else {
        el.value = entry.v;
      }
      changed = changed || el;
    });
    if (changed) { announce(changed); }
    return !!changed;
  }

  // Tell the page's own listeners (the price summary's htmx request) that values changed, once they listen:
  // htmx sets them up when the document has loaded, after this deferred script has run.
  function announce(el) {
    var go = function () { setTimeout(function () { el.dispatchEvent(new Event("change", {bubbles: true})); }, 0); };
    if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", go); } else { go(); }
  }

  function forget(key) {
    var storage = store();
    if (storage) { storage.removeItem(key); }
  }

  var storage = store();
  if (document.querySelector("[data-draft-done]") && storage && storage.getItem(SENT)) {
    forget(storage.getItem(SENT));  // the order it was for is placed
    forget(SENT);
  }
  document.querySelectorAll("form[data-draft]").forEach(function (form) {
    if (storage) { storage.removeItem(SENT); }  // a form page again: what was sent came back refused
    if (restore(form)) { form.classList.add("draft-restored"); }
    save(form);
    form.addEventListener("input", function () { save(form); });
    form.addEventListener("change", function () { save(form); });
    form.addEventListener("submit", function () {
      save(form);
      if (storage) { storage.setItem(SENT, draftKey(location.pathname, ownerOf(form))); }
    });
  });
  // Logging out drops every draft of this tab: what was typed stays with the one who typed it.
  document.querySelectorAll("form[data-draft-clear]").forEach(function (form) {
    form.addEventListener("submit", forgetAll);
  });
  window.anchorgpuDraftKey = draftKey;  // for the browser tests
})();
