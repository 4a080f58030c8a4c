/* medrewardbench annotate: keyboard, timer, image zoom/pan and DICOM window/level.
 * Plain JavaScript, no library, served by the app itself. Every page works without it
 * (forms post normally); this adds the keys and the viewer. */
(function () {
  "use strict";

  var $ = function (sel, root) { return (root || document).querySelector(sel); };
  var $$ = function (sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); };

  function isTyping(el) {
    if (!el) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    if (el.tagName !== "INPUT") return false;
    return ["radio", "checkbox", "button", "submit", "range", "hidden"].indexOf(el.type) < 0;
  }

  /* Active time on the page: counts while the tab is visible and the user did something in the
   * last five minutes, so a case left open overnight does not count as hours of work. */
  function ActiveTimer() {
    var total = 0;
    var last = Date.now();
    var lastInput = Date.now();
    var IDLE_MS = 5 * 60 * 1000;
    function tick() {
      var now = Date.now();
      if (!document.hidden && now - lastInput < IDLE_MS) total += (now - last) / 1000;
      last = now;
    }
    setInterval(tick, 1000);
    ["keydown", "mousemove", "mousedown", "wheel", "scroll", "touchstart"].forEach(function (name) {
      window.addEventListener(name, function () { tick(); lastInput = Date.now(); }, { passive: true, capture: true });
    });
    document.addEventListener("visibilitychange", tick);
    return { seconds: function () { tick(); return total; } };
  }

  /* Zoom (wheel, keys, buttons) and pan (drag) of the case image; right-drag adjusts the window. */
  function Viewer(root) {
    var img = $("#viewer-img", root);
    var label = $("#zoom-level");
    var scale = 1, x = 0, y = 0, fit = 1, placed = false;
    var onWindowDrag = null;

    /* The label is the true scale: screen pixels per image pixel (so a 64x64 MR fitted to a
     * 400-pixel box reads 625%), counting the display's device pixels, not CSS pixels. */
    function apply() {
      img.style.transform = "translate(" + x + "px, " + y + "px) scale(" + scale + ")";
      if (label) {
        var ratio = scale * (window.devicePixelRatio || 1);
        label.textContent = (ratio < 0.995 ? Math.round(ratio * 1000) / 10 : Math.round(ratio * 100)) + "%";
        label.title = "screen pixels per image pixel (" + (img.naturalWidth || "?") + " x " + (img.naturalHeight || "?") + " image)";
      }
    }
    function reset() {
      var box = root.getBoundingClientRect();
      var w = img.naturalWidth || 1, h = img.naturalHeight || 1;
      fit = Math.min(box.width / w, box.height / h);
      scale = fit;
      x = (box.width - w * scale) / 2;
      y = (box.height - h * scale) / 2;
      apply();
    }
    function zoomAt(factor, cx, cy) {
      var next = Math.min(Math.max(scale * factor, fit * 0.25), fit * 40);
      x = cx - ((cx - x) * next) / scale;
      y = cy - ((cy - y) * next) / scale;
      scale = next;
      apply();
    }
    function zoomCenter(factor) {
      var box = root.getBoundingClientRect();
      zoomAt(factor, box.width / 2, box.height / 2);
    }
    img.addEventListener("load", function () { if (!placed) { placed = true; reset(); } });
    if (img.complete && img.naturalWidth) { placed = true; reset(); }
    window.addEventListener("resize", reset);
    if (window.ResizeObserver) {
      var lastBox = null;
      new ResizeObserver(function () {
        var box = root.getBoundingClientRect(), size = box.width + "x" + box.height;
        if (placed && size !== lastBox) reset();
        lastBox = size;
      }).observe(root);
    }
    root.addEventListener("wheel", function (event) {
      event.preventDefault();
      var box = root.getBoundingClientRect();
      zoomAt(event.deltaY < 0 ? 1.2 : 1 / 1.2, event.clientX - box.left, event.clientY - box.top);
    }, { passive: false });
    root.addEventListener("contextmenu", function (event) { event.preventDefault(); });
    root.addEventListener("dblclick", reset);
    root.addEventListener("pointerdown", function (event) {
      var windowing = (event.button === 2 || event.shiftKey) && onWindowDrag;
      var startX = event.clientX, startY = event.clientY, baseX = x, baseY = y;
      root.setPointerCapture(event.pointerId);
      root.classList.add("dragging");
      function move(e) {
        if (windowing) onWindowDrag(e.clientX - startX, e.clientY - startY, false);
        else { x = baseX + e.clientX - startX; y = baseY + e.clientY - startY; apply(); }
      }
      function up(e) {
        root.removeEventListener("pointermove", move);
        root.removeEventListener("pointerup", up);
        root.classList.remove("dragging");
        if (windowing) onWindowDrag(e.clientX - startX, e.clientY - startY, true);
      }
      root.addEventListener("pointermove", move);
      root.addEventListener("pointerup", up);
    });
    $$("[data-zoom]").forEach(function (button) {
      button.addEventListener("click", function () {
        var what = button.getAttribute("data-zoom");
        if (what === "in") zoomCenter(1.25);
        else if (what === "out") zoomCenter(1 / 1.25);
        else reset();
      });
    });
    return {
      zoomIn: function () { zoomCenter(1.25); },
      zoomOut: function () { zoomCenter(1 / 1.25); },
      reset: reset,
      onWindowDrag: function (callback) { onWindowDrag = callback; },
      setSource: function (src) { img.src = src; }
    };
  }

  /* Window/level for DICOM: presets, sliders, number boxes and right-drag; the server renders. */
  function Windowing(root, viewer) {
    var tools = $("#window-tools");
    if (!tools || !root.getAttribute("data-dicom")) return null;
    var src = root.getAttribute("data-src");
    var presets = $$(".preset", tools);
    var center = $("#wl-center"), width = $("#wl-width");
    var centerNum = $("#wl-center-num"), widthNum = $("#wl-width-num");
    var span = Math.max(1, parseFloat(root.getAttribute("data-max")) - parseFloat(root.getAttribute("data-min")));
    var index = 0, timer = null, dragBase = null;

    function set(c, w, preset) {
      c = Math.round(c);
      w = Math.max(1, Math.round(w));
      center.value = centerNum.value = c;
      width.value = widthNum.value = w;
      presets.forEach(function (b) { b.classList.toggle("active", b.getAttribute("data-preset") === preset); });
      clearTimeout(timer);
      timer = setTimeout(function () {
        viewer.setSource(preset === "default" ? src : src + "?center=" + c + "&width=" + w);
      }, 120);
    }
    presets.forEach(function (button, i) {
      button.addEventListener("click", function () {
        index = i;
        set(parseFloat(button.getAttribute("data-center")), parseFloat(button.getAttribute("data-width")), button.getAttribute("data-preset"));
      });
    });
    [center, centerNum].forEach(function (el) { el.addEventListener("input", function () { set(parseFloat(el.value), parseFloat(width.value), null); }); });
    [width, widthNum].forEach(function (el) { el.addEventListener("input", function () { set(parseFloat(center.value), parseFloat(el.value), null); }); });
    viewer.onWindowDrag(function (dx, dy, done) {
      if (dragBase === null) dragBase = [parseFloat(center.value), parseFloat(width.value)];
      var step = span / 400;
      set(dragBase[0] - dy * step, dragBase[1] + dx * step, null);
      if (done) dragBase = null;
    });
    return {
      cycle: function (step) {
        index = (index + step + presets.length) % presets.length;
        presets[index].click();
      }
    };
  }

  /* The pair form: a current criterion, A/B keys, all-six shortcuts, cannot judge, submit. */
  function PairForm(form, timer) {
    var dims = $$(".dim", form);
    var definition = $("#current-definition");
    var current = 0;
    function chosen(dim) { return !!$("input:checked", dim); }
    function focus(i) {
      current = Math.max(0, Math.min(dims.length - 1, i));
      dims.forEach(function (d, j) { d.classList.toggle("current", j === current); });
      var d = dims[current];
      if (definition) definition.textContent = d.getAttribute("data-label") + ": " + d.getAttribute("data-definition");
    }
    function pick(letter) {
      var input = $('input[value="' + letter + '"]', dims[current]);
      input.checked = true;
      var next = current + 1;
      while (next < dims.length && chosen(dims[next])) next++;
      focus(next < dims.length ? next : Math.min(current + 1, dims.length - 1));
    }
    function pickAll(letter) {
      dims.forEach(function (d) { $('input[value="' + letter + '"]', d).checked = true; });
    }
    dims.forEach(function (d, i) {
      d.addEventListener("click", function () { focus(i); });
      $$("input", d).forEach(function (input) { input.addEventListener("change", function () { focus(i); }); });
    });
    var first = 0;
    while (first < dims.length && chosen(dims[first])) first++;
    focus(first < dims.length ? first : 0);

    var cannot = $("#cannot-judge"), reason = $("#cannot-judge-reason");
    function check() {
      if (cannot.checked) return reason.value.trim() ? null : "Say why the case cannot be judged.";
      var missing = dims.filter(function (d) { return !chosen(d); }).map(function (d) { return d.getAttribute("data-label"); });
      return missing.length ? "Choose A or B for every criterion (missing: " + missing.join(", ") + ")." : null;
    }
    return {
      keys: function (event) {
        var k = event.key;
        if (k === "a" || k === "ArrowLeft") { pick("A"); return true; }
        if (k === "b" || k === "ArrowRight") { pick("B"); return true; }
        if (k === "A" && event.shiftKey) { pickAll("A"); return true; }
        if (k === "B" && event.shiftKey) { pickAll("B"); return true; }
        if (k === "ArrowDown" || k === "j") { focus(current + 1); return true; }
        if (k === "ArrowUp" || k === "k") { focus(current - 1); return true; }
        if (/^[1-6]$/.test(k) && parseInt(k, 10) <= dims.length) { focus(parseInt(k, 10) - 1); return true; }
        if (k === "c") { cannot.checked = !cannot.checked; if (cannot.checked) reason.focus(); return true; }
        return false;
      },
      check: check
    };
  }

  function ScreeningForm(form) {
    var boxes = $$("input[data-reason]", form);
    function decide(value) { $('input[name="decision"][value="' + value + '"]', form).checked = true; }
    return {
      keys: function (event) {
        var k = event.key;
        if (k === "a") { decide("accept"); return true; }
        if (k === "r") { decide("reject"); return true; }
        if (/^[1-9]$/.test(k) && parseInt(k, 10) <= boxes.length) {
          var box = boxes[parseInt(k, 10) - 1];
          box.checked = !box.checked;
          return true;
        }
        return false;
      },
      check: function () {
        var decision = $('input[name="decision"]:checked', form);
        if (!decision) return "Accept or reject the question.";
        if (decision.value === "reject" && !boxes.some(function (b) { return b.checked; })) return "Tick at least one reason for rejecting.";
        return null;
      }
    };
  }

  function setupCase() {
    var page = $("#case");
    var form = $("#case-form");
    if (!page || !form) return;
    var timer = ActiveTimer();
    var viewerRoot = $("#viewer");
    var viewer = viewerRoot ? Viewer(viewerRoot) : null;
    var windowing = viewer ? Windowing(viewerRoot, viewer) : null;
    var logic = page.getAttribute("data-kind") === "pair" ? PairForm(form, timer) : ScreeningForm(form);
    var clientError = $("#client-error");
    var legend = $("#legend");
    var submitting = false;

    form.addEventListener("submit", function (event) {
      var problem = logic.check();
      if (problem) {
        event.preventDefault();
        clientError.textContent = problem;
        clientError.classList.remove("hidden");
        return;
      }
      if (submitting) { event.preventDefault(); return; }
      submitting = true;
      $("#seconds").value = timer.seconds().toFixed(1);
    });
    function submit() {
      if (form.requestSubmit) form.requestSubmit($("#submit-button"));
      else if (!logic.check()) { $("#seconds").value = timer.seconds().toFixed(1); form.submit(); }
    }
    function go(link) { if (link) window.location.href = link.href; }

    document.addEventListener("keydown", function (event) {
      if (event.altKey) return;
      if (event.ctrlKey || event.metaKey) {
        if (event.key === "Enter") { event.preventDefault(); submit(); }
        return;
      }
      var active = document.activeElement;
      if (isTyping(active)) {
        if (event.key === "Escape") { active.blur(); event.preventDefault(); }
        else if (event.key === "Enter" && active.tagName === "INPUT") { event.preventDefault(); active.blur(); }
        return;
      }
      var k = event.key;
      if (k === "Enter" && active && (active.tagName === "A" || active.tagName === "BUTTON")) return;
      var handled = logic.keys(event);
      if (!handled) {
        handled = true;
        if (k === "Enter") submit();
        else if (k === "n") go($("#next-link"));
        else if (k === "p") go($("#prev-link"));
        else if (k === "q") window.location.href = page.getAttribute("data-queue");
        else if (k === "m") $("#comment").focus();
        else if ((k === "+" || k === "=") && viewer) viewer.zoomIn();
        else if ((k === "-" || k === "_") && viewer) viewer.zoomOut();
        else if (k === "0" && viewer) viewer.reset();
        else if ((k === "w" || k === "W") && windowing) windowing.cycle(event.shiftKey ? -1 : 1);
        else if (k === "?" && legend) legend.classList.toggle("hidden");
        else handled = false;
      }
      if (handled) event.preventDefault();
    });
  }

  /* The queue page: Enter starts (or continues) even before the browser has moved the focus. */
  function setupQueue() {
    var start = $("form.start");
    if (!start) return;
    document.addEventListener("keydown", function (event) {
      if (event.key !== "Enter" || event.ctrlKey || event.metaKey || event.altKey) return;
      var active = document.activeElement;
      if (active && active !== document.body && active !== start.querySelector("button")) return;
      event.preventDefault();
      start.submit();
    });
  }

  /* A table wider than its box scrolls inside it: a visible hint above it, a named region the keyboard
   * can focus and scroll, and classes for the faded edges. Tables shown as cards on phones get each
   * cell's column name to print above it. */
  function heading(element) {
    for (var node = element.previousElementSibling; node; node = node.previousElementSibling) {
      if (/^H[1-4]$/.test(node.tagName)) return node.textContent.trim();
    }
    var table = $("table", element);
    return table && table.id ? table.id.replace(/-/g, " ") : "Table";
  }
  function setupTables() {
    $$(".cards-on-phone table").forEach(function (table) {
      var names = $$("thead th", table).map(function (th) { return th.textContent.trim(); });
      $$("tbody tr", table).forEach(function (row) {
        Array.prototype.forEach.call(row.children, function (cell, i) { if (names[i]) cell.setAttribute("data-label", names[i]); });
      });
    });
    $$(".table-scroll").forEach(function (wrap) {
      var hint = document.createElement("p");
      hint.className = "scroll-hint";
      hint.setAttribute("aria-hidden", "true");
      hint.textContent = "Scroll sideways for more columns \u2192";
      hint.hidden = true;
      wrap.parentNode.insertBefore(hint, wrap);
      var name = heading(wrap);
      function update() {
        var scrolls = wrap.scrollWidth > wrap.clientWidth + 1;
        hint.hidden = !scrolls;
        wrap.classList.toggle("scrolls", scrolls);
        wrap.classList.toggle("at-start", wrap.scrollLeft <= 1);
        wrap.classList.toggle("at-end", wrap.scrollLeft + wrap.clientWidth >= wrap.scrollWidth - 1);
        if (scrolls) {
          wrap.setAttribute("role", "region");
          wrap.setAttribute("tabindex", "0");
          wrap.setAttribute("aria-label", name + " (table, scrolls sideways)");
        } else {
          ["role", "tabindex", "aria-label"].forEach(function (a) { wrap.removeAttribute(a); });
        }
      }
      wrap.addEventListener("scroll", update, { passive: true });
      window.addEventListener("resize", update);
      update();
    });
  }

  document.addEventListener("DOMContentLoaded", setupTables);
  document.addEventListener("DOMContentLoaded", setupCase);
  document.addEventListener("DOMContentLoaded", setupQueue);
})();
