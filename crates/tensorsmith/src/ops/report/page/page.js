// The tensorsmith report page: draws the summary, a treemap of parameters by name, bits per
// weight by layer and a paged, sortable, filterable table of every tensor from the JSON in
// #report-data (schema tensorsmith.report/1). Hand-written, no dependencies. When the treemap
// and the table's first page are drawn, <html> gets data-ready (milliseconds since navigation).
(function () {
  "use strict";
  var grouped = tsPage.grouped, el = tsPage.el, svg = tsPage.svg;
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var rows = data.tensors;
  var root = document.documentElement;

  // ---- formatting ----
  function human(n, units, step) {
    var i = 0;
    while (Math.abs(n) >= step && i < units.length - 1) { n /= step; i++; }
    return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)) + units[i];
  }
  function bytes(n) { return human(n, [" B", " KiB", " MiB", " GiB", " TiB", " PiB"], 1024); }
  function count(n) { return human(n, ["", " K", " M", " B", " T"], 1000); }
  function num(x) {
    if (x === null || x === undefined) return "";
    if (typeof x !== "number") return String(x);
    return tsPage.finite(x);
  }

  // ---- colours: one per type, in the summary's order ----
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295", "#8cd17d", "#a0cbe8", "#ffbe7d"];
  var MIXED = "#c5ccd4";
  var colour = {}, typeOrder = {};
  data.dtypes.forEach(function (d, i) { colour[d.dtype] = PALETTE[i % PALETTE.length]; typeOrder[d.dtype] = i; });
  function swatch(c) { var s = el("span", { "class": "swatch" }); s.style.background = c; return s; }

  // ---- summary ----
  function drawSummary() {
    var fmt = data.format + (data.format_version ? " (version " + data.format_version + ")" : "");
    document.getElementById("subtitle").textContent = data.model;
    var facts = [
      ["format", fmt],
      ["files", data.files.length === 1 ? bytes(data.file_size)
        : data.files.length + " files, " + bytes(data.file_size)],
      ["tensors", grouped(data.tensor_count)],
      ["parameters", grouped(data.parameters) + " (" + count(data.parameters) + ")"],
      ["tensor bytes", grouped(data.bytes) + " (" + bytes(data.bytes) + ")"],
      ["bits per weight", data.bits_per_weight === null ? "–" : data.bits_per_weight.toFixed(3)]
    ];
    if (data.split) facts.push(["split", data.split.count + " parts"]);
    if (data.stats_schema) facts.push(["statistics", data.stats_schema]);
    var dl = document.getElementById("facts");
    facts.forEach(function (f) { dl.appendChild(el("dt", {}, f[0])); dl.appendChild(el("dd", {}, f[1])); });

    var t = document.getElementById("dtypes");
    var head = el("tr");
    ["type", "tensors", "parameters", "% of parameters", "bytes", "bits/w"].forEach(function (h, i) {
      head.appendChild(el("th", { "class": i ? "num" : undefined }, h));
    });
    t.appendChild(head);
    data.dtypes.forEach(function (d) {
      var tr = el("tr");
      var name = el("td");
      name.appendChild(swatch(colour[d.dtype]));
      name.appendChild(document.createTextNode(d.dtype));
      tr.appendChild(name);
      var share = data.parameters ? (100 * d.parameters / data.parameters).toFixed(1) + " %" : "";
      [grouped(d.tensors), grouped(d.parameters), share, bytes(d.bytes),
        d.bits_per_weight === null ? "–" : d.bits_per_weight.toFixed(3)].forEach(function (v) {
        tr.appendChild(el("td", { "class": "num" }, v));
      });
      t.appendChild(tr);
    });

    var keys = Object.keys(data.metadata);
    var md = document.getElementById("metadata");
    md.querySelector("summary").textContent = "Metadata (" + keys.length + " keys)";
    if (keys.length && keys.length <= 30) md.open = true;
    var mt = md.querySelector("table");
    keys.forEach(function (k) {
      var tr = el("tr");
      tr.appendChild(el("td", {}, k));
      tr.appendChild(el("td", {}, data.metadata[k]));
      mt.appendChild(tr);
    });
    document.getElementById("generator").textContent =
      "Written by " + data.generator + " · page schema " + data.schema;
  }

  // ---- the name tree ----
  function isNumber(s) { return /^[0-9]+$/.test(s); }
  function buildTree() {
    var top = { name: "", path: "", params: 0, count: 0, dtype: null, kids: new Map() };
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i], parts = r.name.split("."), node = top, path = "";
      for (var j = 0; j < parts.length; j++) {
        node.params += r.parameters;
        node.count++;
        node.dtype = node.dtype === null || node.dtype === r.dtype ? r.dtype : "";
        path = j ? path + "." + parts[j] : parts[j];
        var next = node.kids.get(parts[j]);
        if (!next) {
          next = { name: parts[j], path: path, params: 0, count: 0, dtype: null, kids: new Map() };
          node.kids.set(parts[j], next);
        }
        node = next;
      }
      node.params += r.parameters;
      node.count++;
      node.dtype = node.dtype === null || node.dtype === r.dtype ? r.dtype : "";
      node.tensor = true;
    }
    top.kids.forEach(function (k) { k.kids.forEach(compress); });
    return top;
  }
  // Below the top level, a group with one child is drawn as that child under a joined name
  // (`q_proj` + `weight`: one box `q_proj.weight`).
  function compress(node) {
    while (node.kids.size === 1 && !node.tensor) {
      var only = node.kids.values().next().value;
      node.name += "." + only.name;
      node.path = only.path;
      node.kids = only.kids;
      node.tensor = only.tensor;
    }
    node.kids.forEach(function (k) { compress(k); });
  }

  // ---- squarified treemap ----
  // Lays items (sorted by .v, largest first, all > 0) out in the rectangle; sets .x .y .w .h.
  function squarify(items, x, y, w, h) {
    var total = 0, i;
    for (i = 0; i < items.length; i++) total += items[i].v;
    if (total <= 0 || w <= 0 || h <= 0) return;
    var scale = w * h / total;
    function worst(sum, min, max, side) {
      var s2 = side * side, sum2 = sum * sum;
      return Math.max(s2 * max / sum2, sum2 / (s2 * min));
    }
    i = 0;
    while (i < items.length) {
      var side = Math.min(w, h);
      var a = items[i].v * scale, sum = a, min = a, max = a, j = i + 1;
      var best = worst(sum, min, max, side);
      while (j < items.length) {
        var b = items[j].v * scale;
        var next = worst(sum + b, Math.min(min, b), Math.max(max, b), side);
        if (next > best) break;
        sum += b; min = Math.min(min, b); max = Math.max(max, b); best = next; j++;
      }
      var thick = sum / side, at = 0;
      for (var k = i; k < j; k++) {
        var len = items[k].v * scale / thick;
        if (w >= h) { items[k].x = x; items[k].y = y + at; items[k].w = thick; items[k].h = len; }
        else { items[k].x = x + at; items[k].y = y; items[k].w = len; items[k].h = thick; }
        at += len;
      }
      if (w >= h) { x += thick; w -= thick; } else { y += thick; h -= thick; }
      i = j;
    }
  }
  // Numbered children (layers) side by side in order, along the longer side.
  function slice(items, x, y, w, h) {
    var total = 0, at = 0;
    items.forEach(function (it) { total += it.v; });
    items.forEach(function (it) {
      var f = total ? it.v / total : 1 / items.length;
      if (w >= h) { it.x = x + at * w; it.y = y; it.w = f * w; it.h = h; }
      else { it.x = x; it.y = y + at * h; it.w = w; it.h = f * h; }
      at += f;
    });
  }

  var MAX_CHILDREN = 100;   // children drawn per group; the rest as one "N more" box
  var MAX_BOXES = 4000;     // boxes drawn in all
  var MAX_TOP = 150;        // top-level groups drawn, each at least MIN_TOP of the area
  var MIN_TOP = 0.002;

  // A node's children as layout items: numbered ones in order (in runs when they would be
  // thinner than a few pixels), others by size with a tail lumped together.
  function childItems(node, len, top) {
    var kids = Array.from(node.kids.values());
    var numbered = kids.length > 1 && kids.every(function (k) { return isNumber(k.name); });
    if (numbered) {
      kids.sort(function (a, b) { return Number(a.name) - Number(b.name); });
      var per = Math.max(1, Math.ceil(kids.length * 4 / Math.max(len, 1)));
      if (per === 1) return { side: true, items: kids.map(function (k) { return { v: k.params, node: k }; }) };
      var runs = [];
      for (var i = 0; i < kids.length; i += per) {
        var run = kids.slice(i, i + per), p = 0, c = 0, dt = null;
        run.forEach(function (k) { p += k.params; c += k.count; dt = dt === null || dt === k.dtype ? k.dtype : ""; });
        var label = run[0].name + "–" + run[run.length - 1].name;
        runs.push({ v: p, node: { name: label, path: node.path ? node.path + "." + run[0].name : run[0].name,
          params: p, count: c, dtype: dt, kids: new Map(), members: run } });
      }
      return { side: true, items: runs };
    }
    kids.sort(function (a, b) { return b.params - a.params; });
    var limit = top ? MAX_TOP : MAX_CHILDREN, items = [];
    kids.slice(0, limit).forEach(function (k) { items.push({ v: k.params, node: k }); });
    if (kids.length > limit) {
      var rest = kids.slice(limit), p2 = 0, c2 = 0;
      rest.forEach(function (k) { p2 += k.params; c2 += k.count; });
      items.push({ v: p2, node: { name: "… " + rest.length + " more", path: null, params: p2,
        count: c2, dtype: "", kids: new Map(), members: rest } });
    }
    if (top) {
      var total = 0;
      items.forEach(function (it) { total += it.v; });
      items.forEach(function (it) { it.v = Math.max(it.v, total * MIN_TOP, 1e-9); });
    } else {
      items = items.filter(function (it) { return it.v > 0; });
    }
    items.sort(function (a, b) { return b.v - a.v; });
    return { side: false, items: items };
  }

  // The type holding most of a group's parameters, and its share (for groups of mixed types).
  function dominant(node) {
    var by = {}, total = 0;
    (function walk(n) {
      if (n.members) { n.members.forEach(walk); return; }
      if (n.kids.size === 0 || n.dtype) {
        by[n.dtype] = (by[n.dtype] || 0) + n.params;
        total += n.params;
        return;
      }
      n.kids.forEach(walk);
    })(node);
    var best = null;
    Object.keys(by).forEach(function (d) { if (d && (best === null || by[d] > by[best])) best = d; });
    return { dtype: best, share: best !== null && total > 0 ? by[best] / total : 0 };
  }

  function drawTreemap(tree) {
    var box = document.getElementById("treemap");
    box.textContent = "";
    var W = Math.max(box.clientWidth, 300), H = box.clientHeight || 460;
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, height: H, role: "img",
      "aria-label": "treemap of parameters by name" });
    var drawn = 0;
    function draw(node, x, y, w, h, depth) {
      drawn++;
      var group = node.kids.size > 0 && !node.tensor;
      var open = group && w > 40 && h > 30 && depth < 8 && drawn < MAX_BOXES;
      var r = svg("rect", { x: x.toFixed(1), y: y.toFixed(1), width: Math.max(w, 0).toFixed(1),
        height: Math.max(h, 0).toFixed(1), "data-depth": depth, "data-group": node.path || "" });
      if (open) r.setAttribute("class", "group");
      var main = node.dtype ? { dtype: node.dtype, share: 1 } : open ? { dtype: null, share: 0 } : dominant(node);
      if (!open) {
        r.setAttribute("fill", main.dtype ? colour[main.dtype] || MIXED : MIXED);
        if (main.share < 1) r.setAttribute("fill-opacity", "0.72");
      }
      var tip = svg("title", {});
      tip.textContent = (node.path || node.name) + "\n" + grouped(node.params) + " parameters, " +
        grouped(node.count) + (node.count === 1 ? " tensor" : " tensors") +
        (node.dtype ? ", " + node.dtype : main.dtype ? ", mixed types: " + (100 * main.share).toFixed(1) +
          " % of parameters " + main.dtype : ", mixed types");
      r.appendChild(tip);
      if (node.path) {
        r.addEventListener("click", function (ev) {
          ev.stopPropagation();
          setFilter("^" + node.path + (node.tensor && !group ? "" : "."));
        });
      }
      s.appendChild(r);
      if (w > 34 && h > 14) {
        var label = node.name + "  " + count(node.params);
        var fit = Math.floor((w - 6) / 6.2);
        if (fit >= 3) {
          var t = svg("text", { x: (x + 4).toFixed(1), y: (y + 12).toFixed(1) });
          if (open) t.setAttribute("class", "group");
          t.textContent = label.length > fit ? label.slice(0, fit - 1) + "…" : label;
          s.appendChild(t);
        }
      }
      if (!open) return;
      var pad = 2, headH = 16;
      var cx = x + pad, cy = y + headH, cw = w - 2 * pad, ch = h - headH - pad;
      if (cw <= 0 || ch <= 0) return;
      var kids = childItems(node, Math.max(cw, ch), false);
      if (kids.side) slice(kids.items, cx, cy, cw, ch); else squarify(kids.items, cx, cy, cw, ch);
      kids.items.forEach(function (it) {
        if (it.w !== undefined) draw(it.node, it.x, it.y, it.w, it.h, depth + 1);
      });
    }
    var tops = childItems(tree, Math.max(W, H), true);
    if (tops.side) slice(tops.items, 0, 0, W, H); else squarify(tops.items, 0, 0, W, H);
    tops.items.forEach(function (it) {
      if (it.w !== undefined) draw(it.node, it.x, it.y, it.w, it.h, 1);
    });
    box.appendChild(s);
  }

  // ---- bits per weight by layer ----
  function drawBpw() {
    var byLayer = new Map();
    rows.forEach(function (r) {
      var k = r.layer === null || r.layer === undefined ? -1 : r.layer;
      var g = byLayer.get(k);
      if (!g) { g = { layer: k, params: 0, bits: 0, types: {} }; byLayer.set(k, g); }
      g.params += r.parameters;
      g.bits += r.bytes * 8;
      var t = g.types[r.dtype] || (g.types[r.dtype] = { params: 0, bits: 0 });
      t.params += r.parameters;
      t.bits += r.bytes * 8;
    });
    var cols = Array.from(byLayer.values()).filter(function (g) { return g.params > 0; });
    cols.sort(function (a, b) { return a.layer - b.layer; });
    // More than 400 columns: runs of consecutive layers.
    if (cols.length > 400) {
      var per = Math.ceil(cols.length / 400), merged = [];
      for (var i = 0; i < cols.length; i += per) {
        var run = cols.slice(i, i + per);
        var m = { layer: run[0].layer, last: run[run.length - 1].layer, params: 0, bits: 0, types: {} };
        run.forEach(function (g) {
          m.params += g.params; m.bits += g.bits;
          Object.keys(g.types).forEach(function (d) {
            var t = m.types[d] || (m.types[d] = { params: 0, bits: 0 });
            t.params += g.types[d].params; t.bits += g.types[d].bits;
          });
        });
        merged.push(m);
      }
      cols = merged;
    }
    var box = document.getElementById("bpw");
    box.textContent = "";
    if (!cols.length) return;
    var maxBits = 0;
    cols.forEach(function (g) { maxBits = Math.max(maxBits, g.bits / g.params); });
    var top = [1, 2, 4, 8, 16, 32, 64, 128].find(function (v) { return v >= maxBits * 1.05; }) || Math.ceil(maxBits);
    var W = Math.max(box.clientWidth, 300), H = 220, L = 34, B = 22, T = 8;
    var cw = (W - L - 4) / cols.length;
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, height: H, role: "img",
      "aria-label": "bits per weight by layer" });
    var ticks = top <= 8 ? top : 4;
    for (var k = 0; k <= ticks; k++) {
      var v = top * k / ticks, yy = T + (H - T - B) * (1 - v / top);
      s.appendChild(svg("line", { x1: L, x2: W, y1: yy, y2: yy }));
      var tl = svg("text", { x: L - 4, y: yy + 3, "text-anchor": "end" });
      tl.textContent = v % 1 ? v.toFixed(1) : String(v);
      s.appendChild(tl);
    }
    var every = Math.max(1, Math.ceil(cols.length / Math.max(1, (W - L) / 28)));
    cols.forEach(function (g, idx) {
      var x = L + idx * cw, y = H - B;
      var name = g.layer < 0 ? "other" : g.last !== undefined && g.last !== g.layer ? g.layer + "–" + g.last : String(g.layer);
      Object.keys(g.types).sort(function (a, b) { return typeOrder[a] - typeOrder[b]; }).forEach(function (d) {
        var t = g.types[d], h = (H - T - B) * (t.bits / g.params) / top;
        y -= h;
        var r = svg("rect", { x: (x + cw * 0.1).toFixed(2), y: y.toFixed(2), width: Math.max(cw * 0.8, 0.5).toFixed(2),
          height: Math.max(h, 0).toFixed(2), fill: colour[d] || MIXED, "data-layer": name, "data-type": d });
        var tip = svg("title", {});
        tip.textContent = "layer " + name + ": " + (g.bits / g.params).toFixed(3) + " bits/w in all\n" + d + ": " +
          (100 * t.params / g.params).toFixed(1) + " % of parameters, " + (t.bits / t.params).toFixed(3) + " bits/w";
        r.appendChild(tip);
        s.appendChild(r);
      });
      if (idx % every === 0) {
        var lt = svg("text", { x: (x + cw / 2).toFixed(1), y: H - B + 13, "text-anchor": "middle" });
        lt.textContent = name;
        s.appendChild(lt);
      }
    });
    box.appendChild(s);
    var legend = document.getElementById("legend");
    legend.textContent = "";
    data.dtypes.forEach(function (d) {
      var item = el("span");
      item.appendChild(swatch(colour[d.dtype]));
      item.appendChild(document.createTextNode(d.dtype + (d.bits_per_weight === null ? "" : " (" + d.bits_per_weight.toFixed(2) + " bits/w)")));
      legend.appendChild(item);
    });
  }

  // ---- the table ----
  // Columns: the index's, then the statistics' when rows carry a `stats` object.
  var columns = [
    { key: "index", label: "#", num: true, get: function (r, i) { return i; }, fmt: String },
    { key: "name", label: "name", cls: "name", get: function (r) { return r.name; } },
    { key: "dtype", label: "type", get: function (r) { return r.dtype; } },
    { key: "shape", label: "shape", get: function (r) { return r.shape.length; },
      fmt: function (v, r) { return "[" + r.shape.join(", ") + "]"; } },
    { key: "parameters", label: "parameters", num: true, get: function (r) { return r.parameters; }, fmt: grouped },
    { key: "bytes", label: "bytes", num: true, get: function (r) { return r.bytes; }, fmt: bytes },
    { key: "bits_per_weight", label: "bits/w", num: true, get: function (r) { return r.bits_per_weight; },
      fmt: function (v) { return v === null ? "" : v.toFixed(2); } },
    { key: "layer", label: "layer", num: true, get: function (r) { return r.layer; }, fmt: function (v) { return v === null ? "" : String(v); } }
  ];
  if (rows.some(function (r) { return r.layout !== "dense" && r.layout.indexOf("ggml:") !== 0; })) {
    columns.splice(3, 0, { key: "layout", label: "layout", get: function (r) { return r.layout; } });
  }
  if (data.files.length > 1) {
    columns.push({ key: "file", label: "file", get: function (r) { return r.file || ""; } });
  }
  statsColumns().forEach(function (c) { columns.push(c); });

  // Statistics keys as columns: numbers and text as they are, objects of numbers (overflow
  // fractions per target type) one column per entry, histograms ({counts: [...]}) as a
  // sparkline. Keys that repeat the row's own (name, type, shape) are left out.
  function statsColumns() {
    var SKIP = { name: 1, type: 1, shape: 1, elements: 1, dtype: 1, kind: 1 };
    var ORDER = ["count", "min", "max", "mean", "std", "nan", "pos_inf", "neg_inf", "inf", "zeros",
      "subnormals", "exponents", "overflow", "flush", "histogram", "not_measured"];
    var seen = new Map();
    var looked = 0;
    for (var i = 0; i < rows.length && looked < 500; i++) {
      var st = rows[i].stats;
      if (!st || typeof st !== "object") continue;
      looked++;
      Object.keys(st).forEach(function (k) {
        if (SKIP[k]) return;
        var v = st[k], kind = seen.get(k) || { subs: new Set() };
        if (v && typeof v === "object" && Array.isArray(v.counts)) kind.spark = true;
        else if (v && typeof v === "object" && !Array.isArray(v)) Object.keys(v).forEach(function (s) { kind.subs.add(s); });
        else if (v !== null && typeof v !== "object") kind.scalar = true;
        else if (v === null) kind.scalar = kind.scalar || !kind.spark && kind.subs.size === 0;
        seen.set(k, kind);
      });
    }
    var keys = Array.from(seen.keys()).sort(function (a, b) {
      var ia = ORDER.indexOf(a), ib = ORDER.indexOf(b);
      return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || (a < b ? -1 : a > b ? 1 : 0);
    });
    var out = [];
    keys.forEach(function (k) {
      var kind = seen.get(k);
      if (kind.spark) {
        out.push({ key: "stats." + k, label: k, stat: true, spark: true,
          get: function (r) { var v = r.stats && r.stats[k]; return v && v.counts ? v.counts.length : null; } });
      } else if (kind.subs.size) {
        Array.from(kind.subs).forEach(function (sub) {
          out.push({ key: "stats." + k + "." + sub, label: k + " " + sub, num: true, stat: true,
            get: function (r) { var v = r.stats && r.stats[k]; return v && typeof v === "object" ? v[sub] : null; },
            fmt: num, bad: /overflow/.test(k) });
        });
      } else {
        out.push({ key: "stats." + k, label: k, num: k !== "not_measured", stat: true,
          get: function (r) { return r.stats ? r.stats[k] : null; }, fmt: num,
          bad: /^(nan|pos_inf|neg_inf|inf)$/.test(k) });
      }
    });
    return out;
  }

  function sparkline(v) {
    var s = svg("svg", { width: 64, height: 16, viewBox: "0 0 64 16", "class": "spark" });
    if (!v || !v.counts || !v.counts.length) return s;
    var max = Math.max.apply(null, v.counts.concat([1]));
    var w = 64 / v.counts.length;
    v.counts.forEach(function (c, i) {
      if (!c) return;
      var h = Math.max(1, 16 * c / max);
      s.appendChild(svg("rect", { x: (i * w).toFixed(2), y: (16 - h).toFixed(2), width: Math.max(w - 0.3, 0.5).toFixed(2), height: h.toFixed(2), fill: "#4e79a7" }));
    });
    var tip = svg("title", {});
    tip.textContent = (v.first !== undefined ? "from 2^" + v.first + ": " : "") + v.counts.join(" ");
    s.appendChild(tip);
    return s;
  }

  var state = { filter: "", sort: null, desc: false, page: 0, size: 100, view: null };
  // Lower-case text each row is filtered on: name, type and layout.
  var hay = rows.map(function (r) { return (r.name + " " + r.dtype + " " + r.layout).toLowerCase(); });
  var names = rows.map(function (r) { return r.name.toLowerCase(); });

  function computeView() {
    var terms = state.filter.toLowerCase().split(/\s+/).filter(Boolean);
    var view = [];
    for (var i = 0; i < rows.length; i++) {
      var ok = true;
      for (var j = 0; j < terms.length && ok; j++) {
        var t = terms[j];
        ok = t.charAt(0) === "^" ? names[i].lastIndexOf(t.slice(1), 0) === 0 : hay[i].indexOf(t) >= 0;
      }
      if (ok) view.push(i);
    }
    if (state.sort !== null) {
      var col = columns[state.sort];
      var keys = new Array(rows.length);
      view.forEach(function (i) { var v = col.get(rows[i], i); keys[i] = v === undefined ? null : v; });
      var dir = state.desc ? -1 : 1;
      view.sort(function (a, b) {
        var x = keys[a], y = keys[b];
        if (x === null || y === null) return x === y ? a - b : x === null ? 1 : -1;
        return x < y ? -dir : x > y ? dir : a - b;
      });
    }
    state.view = view;
  }

  function drawHead() {
    var thead = document.querySelector("#tensors thead");
    thead.textContent = "";
    var tr = el("tr");
    columns.forEach(function (c, i) {
      var cls = [c.num ? "num" : "", state.sort === i ? (state.desc ? "sorted-desc" : "sorted-asc") : ""].join(" ").trim();
      var th = el("th", { "class": cls || undefined, "data-key": c.key, title: "sort by " + c.label }, c.label);
      th.addEventListener("click", function () {
        if (state.sort === i) state.desc = !state.desc;
        else { state.sort = i; state.desc = !!c.num && c.key !== "index" && c.key !== "layer"; }
        state.page = 0;
        computeView();
        drawHead();
        drawPage();
      });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
  }

  function drawPage() {
    var view = state.view, pages = Math.max(1, Math.ceil(view.length / state.size));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * state.size, end = Math.min(view.length, start + state.size);
    var tbody = document.querySelector("#tensors tbody");
    var frag = document.createDocumentFragment();
    for (var n = start; n < end; n++) {
      var i = view[n], r = rows[i], tr = el("tr", { "data-name": r.name, "data-index": i });
      for (var c = 0; c < columns.length; c++) {
        var col = columns[c], v = col.get(r, i), td = document.createElement("td");
        var cls = (col.num ? "num " : "") + (col.cls || "");
        if (col.spark) td.appendChild(sparkline(r.stats && r.stats[col.label]));
        else td.textContent = col.fmt ? col.fmt(v === undefined ? null : v, r) : v === null || v === undefined ? "" : String(v);
        if (col.bad && typeof v === "number" && v > 0) cls += " bad";
        if (cls.trim()) td.className = cls.trim();
        tr.appendChild(td);
      }
      frag.appendChild(tr);
    }
    tbody.textContent = "";
    tbody.appendChild(frag);
    document.getElementById("count").textContent = view.length === rows.length
      ? grouped(rows.length) + " tensors" : grouped(view.length) + " of " + grouped(rows.length) + " tensors";
    document.getElementById("page").textContent = view.length
      ? grouped(start + 1) + "–" + grouped(end) + " (page " + (state.page + 1) + " of " + pages + ")" : "no match";
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    var t = document.getElementById("tensors");
    t.setAttribute("data-rows", view.length);
    t.setAttribute("data-page", state.page);
    t.setAttribute("data-pages", pages);
    t.setAttribute("data-filter", state.filter);
  }

  function setFilter(text) {
    var input = document.getElementById("filter");
    input.value = text;
    applyFilter();
    document.getElementById("tensors-section").scrollIntoView();
  }
  function applyFilter() {
    state.filter = document.getElementById("filter").value;
    state.page = 0;
    computeView();
    drawPage();
  }

  function wireTable() {
    var timer = null;
    var input = document.getElementById("filter");
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(applyFilter, rows.length > 20000 ? 150 : 0);
    });
    document.getElementById("prev").addEventListener("click", function () { state.page--; drawPage(); });
    document.getElementById("next").addEventListener("click", function () { state.page++; drawPage(); });
    document.getElementById("page-size").addEventListener("change", function (e) {
      state.size = Number(e.target.value) || 100;
      state.page = 0;
      drawPage();
    });
    document.querySelector("#tensors tbody").addEventListener("click", function (e) {
      var tr = e.target.closest("tr");
      if (!tr) return;
      var pre = document.getElementById("detail");
      pre.hidden = false;
      pre.textContent = JSON.stringify(rows[Number(tr.getAttribute("data-index"))], null, 2);
    });
  }

  function main() {
    drawSummary();
    var tree = buildTree();
    drawTreemap(tree);
    drawBpw();
    computeView();
    drawHead();
    drawPage();
    wireTable();
    root.setAttribute("data-ready", performance.now().toFixed(1));
    var resized = null, lastW = window.innerWidth;
    window.addEventListener("resize", function () {
      if (window.innerWidth === lastW) return;
      lastW = window.innerWidth;
      clearTimeout(resized);
      resized = setTimeout(function () { drawTreemap(tree); drawBpw(); }, 200);
    });
  }
  main();
})();
