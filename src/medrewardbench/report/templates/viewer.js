/* The per-case viewer: reads the embedded JSON only when opened, renders one page of cases at a time. */
(function () {
  "use strict";
  var root = document.getElementById("viewer");
  if (!root) { return; }
  var data = null;
  var shown = [];
  var page = 0;
  var PLACEHOLDER = /\{\{\s*([A-Za-z_]+)\s*\}\}/g;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = text; }
    return node;
  }

  function option(select, value, label) {
    var o = el("option", null, label);
    o.value = value;
    select.appendChild(o);
  }

  /* the template's user text with its placeholders filled in one pass (as the judges render it) */
  function renderUser(template, question, a, b) {
    var values = { question: question, response_a: a, response_b: b, dimensions: data.dimensions.join(", ") };
    return template.user.replace(PLACEHOLDER, function (m, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? values[name] : m;
    });
  }

  function dimIndex() {
    return data.dimensions.indexOf(root.querySelector("[name=v-dim]").value);
  }

  /* right / wrong / failed for one judge on one case on the chosen dimension, over the orders it ran */
  function outcome(c, j, d) {
    var label = c.labels[d];
    var entries = c.j[j];
    var failed = true;
    var wrong = false;
    for (var k = 0; k < entries.length; k++) {
      var v = entries[k][0][d];
      if (v) { failed = false; }
      if (label && v !== label) { wrong = true; }
    }
    if (failed) { return "failed"; }
    if (!label) { return "unlabelled"; }
    return wrong ? "wrong" : "right";
  }

  function filter() {
    var ja = parseInt(root.querySelector("[name=v-judge-a]").value, 10);
    var organ = root.querySelector("[name=v-organ]").value;
    var agreement = root.querySelector("[name=v-agreement]").value;
    var d = dimIndex();
    shown = [];
    for (var i = 0; i < data.cases.length; i++) {
      var c = data.cases[i];
      if (organ && c.organ !== organ) { continue; }
      if (agreement && outcome(c, ja, d) !== agreement) { continue; }
      shown.push(i);
    }
    page = 0;
    draw();
  }

  function verdictTable(c, j) {
    var judge = data.judges[j];
    var table = el("table", "v-verdicts");
    var head = el("tr");
    head.appendChild(el("th", null, "order"));
    data.dimensions.forEach(function (dim) { head.appendChild(el("th", null, dim.slice(0, 5))); });
    table.appendChild(head);
    var labelled = el("tr", "labelled");
    labelled.appendChild(el("th", null, "label"));
    c.labels.forEach(function (v) { labelled.appendChild(el("td", null, v ? String(v) : "–")); });
    table.appendChild(labelled);
    c.j[j].forEach(function (entry, k) {
      var row = el("tr");
      row.appendChild(el("th", null, judge.orders[k]));
      entry[0].forEach(function (v, d) {
        var cls = !v ? "fail" : (!c.labels[d] ? "nolabel" : (v === c.labels[d] ? "ok" : "bad"));
        row.appendChild(el("td", "pick " + cls, v ? String(v) : "—"));
      });
      table.appendChild(row);
    });
    return table;
  }

  function judgeColumn(c, j) {
    var judge = data.judges[j];
    var col = el("div", "v-judge");
    col.appendChild(el("h4", null, judge.label));
    var wrap = el("div", "table-wrap");
    wrap.appendChild(verdictTable(c, j));
    col.appendChild(wrap);
    var t = judge.template;
    c.j[j].forEach(function (entry, k) {
      var order = judge.orders[k];
      var box = el("details", "v-request");
      box.appendChild(el("summary", null, order + " order: prompt and raw output" + (entry[2] ? " (failed)" : "")));
      if (t.note) { box.appendChild(el("p", "note", t.note)); }
      if (t.user !== undefined && c.q !== null) {
        var a = order === "swapped" ? c.r2 : c.r1;
        var b = order === "swapped" ? c.r1 : c.r2;
        if (t.system) { box.appendChild(el("p", "muted", "system:")); box.appendChild(el("pre", null, t.system)); }
        box.appendChild(el("p", "muted", "user" + (c.img ? " (the image first, then):" : ":")));
        box.appendChild(el("pre", null, renderUser(t, c.q, a, b)));
      } else if (t.user !== undefined) {
        box.appendChild(el("p", "note", "the case's texts could not be loaded: the prompt cannot be shown"));
      }
      if (entry[2]) { box.appendChild(el("p", "note", "failure: " + entry[2])); }
      box.appendChild(el("p", "muted", "raw output:"));
      box.appendChild(el("pre", null, entry[1] === null ? "(none stored)" : entry[1]));
      col.appendChild(box);
    });
    return col;
  }

  function card(i) {
    var c = data.cases[i];
    var ja = parseInt(root.querySelector("[name=v-judge-a]").value, 10);
    var jbValue = root.querySelector("[name=v-judge-b]").value;
    var art = el("article", "v-case");
    art.appendChild(el("h3", null, c.id + " · " + c.organ));
    var top = el("div", "v-top");
    if (c.img && data.images[c.img]) {
      var img = el("img", "v-thumb");
      img.src = data.images[c.img];
      img.alt = "image of case " + c.id;
      img.loading = "lazy";
      top.appendChild(img);
    }
    var texts = el("div", "v-texts");
    if (c.q !== null) {
      texts.appendChild(el("p", "v-q", c.q));
      var r = el("div", "v-answers");
      [["Response 1", c.r1], ["Response 2", c.r2]].forEach(function (pair) {
        var box = el("details", "v-answer");
        box.appendChild(el("summary", null, pair[0] + " (" + pair[1].split(/\s+/).filter(Boolean).length + " words)"));
        box.appendChild(el("pre", null, pair[1]));
        r.appendChild(box);
      });
      texts.appendChild(r);
    } else {
      texts.appendChild(el("p", "note", "question and answers not available (the data source could not be loaded)"));
    }
    top.appendChild(texts);
    art.appendChild(top);
    var side = el("div", "v-side");
    side.appendChild(judgeColumn(c, ja));
    if (jbValue !== "") { side.appendChild(judgeColumn(c, parseInt(jbValue, 10))); }
    art.appendChild(side);
    return art;
  }

  function draw() {
    var size = data.page_size;
    var pages = Math.max(1, Math.ceil(shown.length / size));
    var list = root.querySelector(".v-list");
    list.textContent = "";
    var start = page * size;
    for (var k = start; k < Math.min(start + size, shown.length); k++) { list.appendChild(card(shown[k])); }
    root.querySelectorAll(".v-status").forEach(function (s) {
      s.textContent = shown.length ? ("cases " + (start + 1) + "–" + Math.min(start + size, shown.length) +
        " of " + shown.length + " · page " + (page + 1) + " of " + pages) : "no case matches";
    });
    root.querySelectorAll(".v-prev").forEach(function (b) { b.disabled = page === 0; });
    root.querySelectorAll(".v-next").forEach(function (b) { b.disabled = page >= pages - 1; });
  }

  /* the embedded document: plain JSON, or gzip in base64 inflated by the browser (large reports) */
  function read(done) {
    var block = document.getElementById("viewer-data");
    if (block.dataset.encoding !== "gzip") { done(JSON.parse(block.textContent)); return; }
    if (typeof DecompressionStream === "undefined") {
      root.querySelector(".v-list").textContent = "This browser cannot unpack the case viewer (DecompressionStream); " +
        "open the report in a current Chrome, Edge, Firefox or Safari.";
      return;
    }
    var text = atob(block.textContent.trim());
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    new Response(stream).text().then(function (json) { done(JSON.parse(json)); });
  }

  var opening = false;
  function open() {
    if (data || opening) { return; }
    opening = true;
    var t0 = performance.now();
    read(function (parsed) { data = parsed; start(t0); });
  }

  function start(t0) {
    var a = root.querySelector("[name=v-judge-a]");
    var b = root.querySelector("[name=v-judge-b]");
    option(b, "", "(none)");
    data.judges.forEach(function (j, i) { option(a, String(i), j.label); option(b, String(i), j.label); });
    var organ = root.querySelector("[name=v-organ]");
    option(organ, "", "all");
    Array.from(new Set(data.cases.map(function (c) { return c.organ; }))).sort().forEach(function (o) { option(organ, o, o); });
    var dim = root.querySelector("[name=v-dim]");
    data.dimensions.forEach(function (d) { option(dim, d, d); });
    dim.value = "overall";
    root.querySelectorAll("select").forEach(function (s) { s.addEventListener("change", filter); });
    root.querySelectorAll(".v-prev").forEach(function (btn) { btn.addEventListener("click", function () { page -= 1; draw(); }); });
    root.querySelectorAll(".v-next").forEach(function (btn) { btn.addEventListener("click", function () { page += 1; draw(); }); });
    filter();
    root.dataset.openMs = String(Math.round(performance.now() - t0));
    root.classList.add("open");
  }

  var toggle = root.querySelector("details.v-open");
  toggle.addEventListener("toggle", function () { if (toggle.open) { open(); } });
  if (location.hash === "#viewer") { toggle.open = true; open(); }
})();
