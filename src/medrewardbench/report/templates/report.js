// Filters by organ system, judge and dimension, and images opened full size. No network, no library.
// An element with data-organ, data-judge or data-dim (space-separated values) is hidden while a filter
// of that kind is set to a value it does not list. Without this script everything stays visible.
(function () {
  "use strict";
  var bar = document.getElementById("filters");
  if (!bar) { return; }
  bar.hidden = false;
  var kinds = ["organ", "judge", "dim"];
  var selects = {};
  kinds.forEach(function (kind) { selects[kind] = bar.querySelector("select[data-filter='" + kind + "']"); });
  var counter = document.getElementById("filter-count");
  var cases = document.querySelectorAll("article.case");

  function matches(element, kind, wanted) {
    var values = element.getAttribute("data-" + kind);
    return values === null || wanted === "" || values.split(" ").indexOf(wanted) >= 0;
  }

  function apply() {
    var wanted = {};
    kinds.forEach(function (kind) { wanted[kind] = selects[kind] ? selects[kind].value : ""; });
    document.querySelectorAll("[data-organ],[data-judge],[data-dim]").forEach(function (element) {
      if (element.closest("#filters")) { return; }
      var shown = kinds.every(function (kind) { return matches(element, kind, wanted[kind]); });
      element.classList.toggle("filtered-out", !shown);
    });
    if (counter) {
      var visible = 0;
      cases.forEach(function (c) { if (!c.classList.contains("filtered-out")) { visible += 1; } });
      var any = kinds.some(function (kind) { return wanted[kind] !== ""; });
      counter.textContent = any ? visible + " of " + cases.length + " cases shown" : "";
    }
  }

  kinds.forEach(function (kind) { if (selects[kind]) { selects[kind].addEventListener("change", apply); } });
  var reset = document.getElementById("filter-reset");
  if (reset) {
    reset.addEventListener("click", function () {
      kinds.forEach(function (kind) { if (selects[kind]) { selects[kind].value = ""; } });
      apply();
    });
  }

  // images: a click opens the embedded image at its own size over the page; a click or Escape closes it
  var viewer = document.getElementById("image-viewer");
  var viewerImage = viewer ? viewer.querySelector("img") : null;
  var viewerCaption = viewer ? viewer.querySelector("figcaption") : null;
  function close() { if (viewer) { viewer.hidden = true; viewerImage.removeAttribute("src"); } }
  document.querySelectorAll("img.zoomable").forEach(function (image) {
    image.addEventListener("click", function () {
      if (!viewer) { return; }
      viewerImage.src = image.src;
      viewerImage.alt = image.alt;
      viewerCaption.textContent = image.getAttribute("data-caption") || "";
      viewer.hidden = false;
    });
  });
  if (viewer) { viewer.addEventListener("click", close); }
  document.addEventListener("keydown", function (event) { if (event.key === "Escape") { close(); } });
  apply();
})();
