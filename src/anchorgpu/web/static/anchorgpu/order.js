// The order page: a live countdown to the quote's expiry. Without JavaScript
// the page still shows the expiry time and the minutes left when it loaded.
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
  tick();
  setInterval(tick, 1000);
  document.body.addEventListener("htmx:afterSwap", tick);
})();
