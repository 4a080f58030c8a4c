// Filters by organ system, judge and dimension, images opened full size, tables that say when they scroll
// sideways and leaderboard cards on phones. No network, no library.
// An element with data-organ, data-judge or data-dim (space-separated values) is hidden while a filter
// of that kind is set to a value it does not list. Without this script everything stays visible.
(function () {
  "use strict";
  // A table wider than its box scrolls inside it: a visible hint above it, a named region a keyboard can
  // focus and scroll, and the classes the stylesheet fades the edges with.
  function heading(element) {
    for (var node = element.previousElementSibling; node; node = node.previousElementSibling) {
      if (/^H[1-4]$/.test(node.tagName)) { return node.textContent.trim(); }
    }
    var section = element.closest("section, article");
    var title = section ? section.querySelector("h2, h3") : null;
    return title ? title.textContent.trim() : "Table";
  }
  // All boxes are measured first and marked after, so a report of a thousand cases lays out once.
  function Scroller(wrap) {
    var hint = document.createElement("p");
    hint.className = "scroll-hint";
    hint.setAttribute("aria-hidden", "true");
    hint.textContent = "Scroll sideways for more columns \u2192";
    hint.hidden = true;
    wrap.parentNode.insertBefore(hint, wrap);
    var name = heading(wrap);
    function measure() {
      return [wrap.scrollWidth > wrap.clientWidth + 1, wrap.scrollLeft <= 1,
              wrap.scrollLeft + wrap.clientWidth >= wrap.scrollWidth - 1];
    }
    function mark(m) {
      hint.hidden = !m[0];
      wrap.classList.toggle("scrolls", m[0]);
      wrap.classList.toggle("at-start", m[1]);
      wrap.classList.toggle("at-end", m[2]);
      if (m[0]) {
        wrap.setAttribute("role", "region");
        wrap.setAttribute("tabindex", "0");
        wrap.setAttribute("aria-label", name + " (table, scrolls sideways)");
      } else {
        ["role", "tabindex", "aria-label"].forEach(function (a) { wrap.removeAttribute(a); });
      }
    }
    wrap.addEventListener("scroll", function () { mark(measure()); }, { passive: true });
    return { measure: measure, mark: mark };
  }
  // on a narrow screen these tables show one card per row, each number under its column's name
  document.querySelectorAll("table.leaderboard, table.stand-in").forEach(function (table) {
    var names = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) { return th.textContent.trim(); });
    table.querySelectorAll("tbody tr").forEach(function (row) {
      Array.prototype.forEach.call(row.children, function (cell, i) {
        if (names[i]) { cell.setAttribute("data-label", names[i]); }
      });
    });
    table.classList.add("as-cards");
    if (table.parentElement.classList.contains("table-wrap")) { table.parentElement.classList.add("cards"); }
  });
  var scrollers = Array.prototype.map.call(document.querySelectorAll(".table-wrap"), Scroller);
  function remeasure() {
    var sizes = scrollers.map(function (s) { return s.measure(); });
    scrollers.forEach(function (s, i) { s.mark(sizes[i]); });
  }
  remeasure();
  window.addEventListener("resize", remeasure);
  // filtering and opening folded sections change widths without a resize
  document.querySelectorAll("details").forEach(function (d) { d.addEventListener("toggle", remeasure); });

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
    remeasure();
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
