// The tensorsmith diff page: draws a summary, the error of each tensor pair by layer (one line
// per tensor role, log scale), the worst twenty pairs and a sortable, filterable table of
// every pair from the JSON in #diff-data (schema tensorsmith.diff/1 with value metrics).
// Hand-written, no dependencies. When everything is drawn, <html> gets data-ready
// (milliseconds since navigation).
(function () {
  "use strict";
  var grouped = tsPage.grouped, el = tsPage.el, svg = tsPage.svg;
  var data = JSON.parse(document.getElementById("diff-data").textContent);
  var values = data.values || { compared: [], not_compared: [] };
  var rows = values.compared;
  var root = document.documentElement;
  var WORST = 20;

  // ---- numbers: JSON has "inf"/"-inf" strings for infinities, null for undefined ----
  function val(x) {
    if (x === "inf") return Infinity;
    if (x === "-inf") return -Infinity;
    return x === null || x === undefined ? null : x;
  }
  function num(x) {
    x = val(x);
    if (x === null) return "–";
    if (x === Infinity) return "∞";
    if (x === -Infinity) return "−∞";
    return tsPage.finite(x);
  }

  // ---- metrics of a row ----
  function metric(r, m) {
    if (m === "one_minus_cos") { var c = val(r.cosine); return c === null ? null : 1 - c; }
    return val(r[m]);
  }
  // The worst-first key: relative RMSE, else RMSE (A all zero), else nothing.
  function badness(r) {
    var x = val(r.rel_rmse);
    if (x === null) x = val(r.rmse);
    return x === null ? -1 : x;
  }

  // ---- colours: one per role, in order of first appearance ----
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295", "#8cd17d", "#a0cbe8", "#ffbe7d"];
  var roles = [], colour = {}, shown = {};
  rows.forEach(function (r) {
    if (r.layer === null || r.layer === undefined || colour[r.role] !== undefined) return;
    colour[r.role] = PALETTE[roles.length % PALETTE.length];
    roles.push(r.role);
  });

  // ---- summary ----
  function drawSummary() {
    document.getElementById("subtitle").textContent = data.a + "  →  " + data.b;
    var t = data.tensors;
    var facts = [
      ["A", data.a], ["B", data.b],
      ["pairs compared", grouped(rows.length)],
      ["with different values", grouped(rows.filter(function (r) { return !r.identical; }).length)],
      ["not compared", grouped(values.not_compared.length)],
      ["only in A / only in B", grouped(t.removed.length) + " / " + grouped(t.added.length)],
      ["name map", values.name_map || "none"]
    ];
    var dl = document.getElementById("facts");
    facts.forEach(function (f) { dl.appendChild(el("dt", {}, f[0])); dl.appendChild(el("dd", {}, f[1])); });
    document.getElementById("generator").textContent = "tensorsmith diff · " + data.schema;
  }

  // ---- chart: error by layer, one line per role ----
  function drawChart() {
    var box = document.getElementById("chart");
    box.textContent = "";
    var m = document.getElementById("metric").value;
    var pts = {}, layers = [], lo = Infinity, hi = -Infinity, zero = false;
    rows.forEach(function (r) {
      if (r.layer === null || r.layer === undefined) return;
      var y = metric(r, m);
      if (y === null || !isFinite(y)) return;
      (pts[r.role] = pts[r.role] || []).push([r.layer, y]);
      layers.push(r.layer);
      if (y > 0) { lo = Math.min(lo, y); hi = Math.max(hi, y); } else zero = true;
    });
    if (!isFinite(lo)) { lo = 1e-12; hi = 1; }
    var yMin = Math.floor(Math.log10(lo)) - (lo === hi ? 1 : 0), yMax = Math.ceil(Math.log10(hi));
    if (yMax <= yMin) yMax = yMin + 1;
    // Zeros (and negatives of 1 − cosine) get a line of their own, one decade below.
    var zeroAt = zero ? yMin - 1 : null;
    if (zero) yMin -= 1;
    var xMin = layers.length ? Math.min.apply(null, layers) : 0;
    var xMax = layers.length ? Math.max.apply(null, layers) : 1;
    if (xMax === xMin) xMax = xMin + 1;
    var W = Math.max(box.clientWidth || 800, 400), H = 320, L = 56, R = 14, T = 10, B = 30;
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "error by layer" });
    function X(x) { return L + (x - xMin) / (xMax - xMin) * (W - L - R); }
    function Ye(e) { return T + (yMax - e) / (yMax - yMin) * (H - T - B); }
    function Y(y) { return Ye(y > 0 ? Math.max(Math.log10(y), zero ? yMin + 1 : yMin) : yMin); }
    for (var e = yMin; e <= yMax; e++) {
      s.appendChild(svg("line", { "class": "grid", x1: L, x2: W - R, y1: Ye(e), y2: Ye(e) }));
      var lab = svg("text", { x: L - 6, y: Ye(e) + 3, "text-anchor": "end" });
      lab.textContent = e === zeroAt ? "0" : "1e" + e;
      s.appendChild(lab);
    }
    var step = Math.max(1, Math.ceil((xMax - xMin) / 16));
    for (var x = xMin; x <= xMax; x += step) {
      var t = svg("text", { x: X(x), y: H - B + 14, "text-anchor": "middle" });
      t.textContent = String(x);
      s.appendChild(t);
    }
    var xl = svg("text", { x: (L + W - R) / 2, y: H - 3, "text-anchor": "middle" });
    xl.textContent = "layer";
    s.appendChild(xl);
    roles.forEach(function (role) {
      var p = (pts[role] || []).slice().sort(function (a, b) { return a[0] - b[0]; });
      var d = p.map(function (q, i) { return (i ? "L" : "M") + X(q[0]).toFixed(1) + "," + Y(q[1]).toFixed(1); }).join("");
      var path = svg("path", { "class": "role-line" + (anyShown() && !shown[role] ? " dim" : ""), d: d || "M0,0", stroke: colour[role], "data-role": role });
      var title = svg("title", {});
      title.textContent = role;
      path.appendChild(title);
      s.appendChild(path);
      p.forEach(function (q) {
        var c = svg("circle", { cx: X(q[0]).toFixed(1), cy: Y(q[1]).toFixed(1), r: 2.2, fill: colour[role] });
        var tt = svg("title", {});
        tt.textContent = role + " · layer " + q[0] + ": " + num(q[1]);
        c.appendChild(tt);
        s.appendChild(c);
      });
    });
    box.appendChild(s);
  }
  function anyShown() { for (var k in shown) if (shown[k]) return true; return false; }

  function drawLegend() {
    var lg = document.getElementById("roles");
    lg.textContent = "";
    roles.forEach(function (role) {
      var sp = el("span", { "class": "role" + (anyShown() && !shown[role] ? " off" : ""), "data-role": role });
      var sw = el("span", { "class": "swatch" });
      sw.style.background = colour[role];
      sp.appendChild(sw);
      sp.appendChild(document.createTextNode(role));
      sp.addEventListener("click", function () {
        shown[role] = !shown[role];
        drawLegend(); drawChart(); drawPairs();
      });
      lg.appendChild(sp);
    });
  }

  // ---- tables ----
  var COLS = [
    ["name", "name", function (r) { return r.name; }],
    ["b name", "b_name", function (r) { return r.b_name || ""; }],
    ["elements", "elements", function (r) { return r.elements; }],
    ["differing", "differing", function (r) { return r.differing; }],
    ["max |a−b|", "max_abs_diff", function (r) { return val(r.max_abs_diff); }],
    ["RMSE", "rmse", function (r) { return val(r.rmse); }],
    ["rel. RMSE", "rel_rmse", function (r) { return val(r.rel_rmse); }],
    ["cosine", "cosine", function (r) { return val(r.cosine); }],
    ["SNR dB", "snr_db", function (r) { return val(r.snr_db); }]
  ];
  function head(table, sort, onSort) {
    var thead = table.querySelector("thead");
    thead.textContent = "";
    var tr = el("tr");
    COLS.forEach(function (c, i) {
      var cls = (i >= 2 ? "num" : "") + (sort && sort.col === i ? " sorted-" + (sort.asc ? "asc" : "desc") : "");
      var th = el("th", { "class": cls.trim() || undefined }, c[0]);
      if (onSort) th.addEventListener("click", function () { onSort(i); });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
  }
  function body(table, list) {
    var tb = table.querySelector("tbody");
    tb.textContent = "";
    var frag = document.createDocumentFragment();
    list.forEach(function (r) {
      var tr = el("tr");
      COLS.forEach(function (c, i) {
        var v = c[2](r);
        var bad = (c[1] === "max_abs_diff" && v === Infinity) || (c[1] === "cosine" && v !== null && v < 0.99);
        tr.appendChild(el("td", { "class": i < 2 ? "name" : "num" + (bad ? " bad" : "") }, i < 2 ? v : num(v)));
      });
      frag.appendChild(tr);
    });
    tb.appendChild(frag);
  }
  function drawWorst() {
    var list = rows.slice().sort(function (a, b) { return badness(b) - badness(a) || (a.name < b.name ? -1 : 1); });
    var t = document.getElementById("worst");
    head(t, null, null);
    body(t, list.slice(0, WORST));
  }
  var sort = { col: 6, asc: false };
  function cmp(x, y) {
    if (x === y) return 0;
    if (x === null || x === "") return 1;
    if (y === null || y === "") return -1;
    return x < y ? -1 : 1;
  }
  function drawPairs() {
    var words = document.getElementById("filter").value.toLowerCase().split(/\s+/).filter(Boolean);
    var list = rows.filter(function (r) {
      if (anyShown() && !shown[r.role]) return false;
      var n = (r.name + " " + (r.b_name || "")).toLowerCase();
      return words.every(function (w) { return n.indexOf(w) >= 0; });
    });
    var get = COLS[sort.col][2];
    list.sort(function (a, b) {
      var c = cmp(get(a), get(b));
      if (c && get(a) !== null && get(b) !== null && get(a) !== "" && get(b) !== "") c = sort.asc ? c : -c;
      return c || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    });
    var t = document.getElementById("pairs");
    head(t, sort, function (i) {
      sort = { col: i, asc: sort.col === i ? !sort.asc : i < 2 };
      drawPairs();
    });
    body(t, list);
    document.getElementById("count").textContent = grouped(list.length) + " of " + grouped(rows.length) + " pairs";
  }
  function drawSkipped() {
    var d = document.getElementById("skipped");
    var n = values.not_compared;
    d.hidden = n.length === 0;
    d.querySelector("summary").textContent = grouped(n.length) + " not compared";
    var t = d.querySelector("table");
    n.forEach(function (x) {
      var tr = el("tr");
      tr.appendChild(el("td", { "class": "name" }, x.name));
      tr.appendChild(el("td", {}, x.reason));
      t.appendChild(tr);
    });
  }

  drawSummary();
  drawLegend();
  drawChart();
  drawWorst();
  drawPairs();
  drawSkipped();
  document.getElementById("metric").addEventListener("change", drawChart);
  document.getElementById("filter").addEventListener("input", drawPairs);
  var resized = null;
  window.addEventListener("resize", function () { clearTimeout(resized); resized = setTimeout(drawChart, 100); });
  root.setAttribute("data-ready", String(Math.round(performance.now())));
})();
