// The language switcher changes language as soon as one is chosen; without
// JavaScript its "Change" button does the same.
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    var button = select.form.querySelector("button[type=submit]");
    if (button) { button.hidden = true; }
    select.addEventListener("change", function () { select.form.submit(); });
  });
})();
