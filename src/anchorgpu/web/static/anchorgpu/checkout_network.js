// The checkout's "pay with": the customer picks a coin, then one of its networks. Without JavaScript every
// coin's networks are listed under it (the server refuses a network of another coin with a clear message).
// Here only the chosen coin's networks show; the others are hidden and disabled, so a network ticked under a
// coin the customer then left is not sent. A coin with a single network has no second choice.
(function () {
  "use strict";
  function update(box) {
    var chosen = box.querySelector("input[name=coin]:checked");
    var coin = chosen ? chosen.value : "";
    box.querySelectorAll("[data-networks]").forEach(function (group) {
      var shown = group.getAttribute("data-networks") === coin;
      group.hidden = !shown;
      group.querySelectorAll("input").forEach(function (input) { input.disabled = !shown; });
    });
  }
  function start() {
    document.querySelectorAll("[data-pay-with]").forEach(function (box) {
      update(box);
      box.addEventListener("change", function (event) {
        if (event.target.name === "coin") { update(box); }
      });
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
}());
