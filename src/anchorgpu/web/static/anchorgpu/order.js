// The order page: a live countdown to the quote's expiry, and copy buttons for
// the deposit address and the amount. Without JavaScript the page still shows
// the expiry time and the minutes left when it loaded, the copy buttons stay
// hidden, and the address and amount are plain selectable text.
(function () {
  "use strict";
  function pad(n) { return String(n).padStart(2, "0"); }
  function tick() {
    document.querySelectorAll("time.countdown").forEach(function (el) {
      var end = Date.parse(el.getAttribute("datetime"));
      var left = Math.floor((end - Date.now()) / 1000);
      var out = el.parentElement.querySelector(".remaining");
      if (!out) { return; }
      if (left <= 0) { out.textContent = "(" + el.dataset.expiredText + ")"; return; }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      out.textContent = "(" + (h ? h + ":" + pad(m) : m) + ":" + pad(s) + ")";
    });
  }

  // The copied value is the button's data-copy: the exact amount with a dot, as
  // wallets take it, not the localised figure shown beside it.
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {  // plain http: the older way
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "visually-hidden";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(area);
      if (ok) { resolve(); } else { reject(new Error("copy refused")); }
    });
  }
  function showCopyButtons() {
    document.querySelectorAll("button.copy[hidden]").forEach(function (button) { button.hidden = false; });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy") : null;
    if (!button) { return; }
    var status = button.nextElementSibling;
    copyText(button.dataset.copy).then(function () {
      if (status && status.classList.contains("copied")) {
        status.textContent = button.dataset.copiedText;
        clearTimeout(button.copiedTimer);
        button.copiedTimer = setTimeout(function () { status.textContent = ""; }, 3000);
      }
    }, function () {
      if (status) { status.textContent = ""; }
    });
  });

  tick();
  showCopyButtons();
  setInterval(tick, 1000);
  document.body.addEventListener("htmx:afterSwap", function () { tick(); showCopyButtons(); });
})();
