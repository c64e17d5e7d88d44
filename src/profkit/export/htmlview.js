"use strict";
// profkit's HTML view (profkit/export/html.py embeds this file and the profile's JSON).
// Three views of one folded tree: the call tree (rows, the default), a flame graph (icicle
// or flame) and a timeline when the profile has spans. No recursion anywhere: a recursive
// program's tree can be thousands of levels deep.
(function () {
  var D = JSON.parse(document.getElementById("profkit-data").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var treeEl = $("tree"), chart = $("chart"), tip = $("tip"), status = $("status");
  var search = $("search"), foldBox = $("fold");
  var SHOW_SHARE = 0.005, OPEN_SHARE = 0.02, MAX_OPEN = 400, MAX_ROWS = 20000, MAX_DIVS = 20000;
  var ROW = 18, INDENT = 12, MAX_INDENT = 40, REVEAL = 20;

  function fmt(v) {
    var units = D.mode === "memory" ? [[1073741824, "GiB"], [1048576, "MiB"], [1024, "KiB"], [1, "B"]]
      : [[1e9, "s"], [1e6, "ms"], [1e3, "\u00b5s"], [1, "ns"]];
    for (var i = 0; i < units.length; i++) {
      if (v >= units[i][0] || i === units.length - 1) {
        var x = v / units[i][0];
        return (units[i][1] === "B" || units[i][1] === "ns" ? String(Math.round(x)) : x.toPrecision(3)) +
          " " + units[i][1];
      }
    }
    return String(v);
  }
  function pct(v, of) { return (100 * v / (of || 1)).toFixed(1) + "%"; }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  // ---- the trees: rows are [parent row, frame, total, self, calls], parents first ----
  var root = { f: -1, label: "all threads", total: 0, self: 0, calls: 0, kids: [], parent: null };
  D.threads.forEach(function (t) {
    var made = [];
    t.nodes.forEach(function (r, i) {
      var n = { f: r[1], total: r[2], self: r[3], calls: r[4], kids: [], parent: null };
      if (i === 0) {
        n.label = "thread " + t.label; n.parent = root; n.thread = true; n.hot = t.hot;
        root.kids.push(n);
      } else {
        n.parent = made[r[0]]; n.parent.kids.push(n);
      }
      made.push(n);
    });
  });
  root.total = root.kids.reduce(function (a, c) { return a + c.total; }, 0);
  var everything = [root];
  for (var k = 0; k < everything.length; k++) {
    var node = everything[k], sum = 0;
    node.kids.sort(function (a, b) { return b.total - a.total; });
    node.kids.forEach(function (c) { sum += c.total; everything.push(c); });
    node.thr = node.thread ? node : (node.parent ? node.parent.thr : null);
    node.gap = Math.max(node.total - node.self - sum, 0);  // left out by the page's budget
  }
  var trimmed = D.left.nodes > 0;

  function name(n) {
    if (n.group) { return groupLabel(n); }
    return n.f >= 0 ? D.names[n.f] : n.label;
  }
  function lib(n) { return n.f >= 0 && !D.own[n.f]; }

  // ---- folding: a run of library frames under one library call becomes one group row ----
  var folding = true;
  function isHead(n) { return folding && lib(n) && !(n.parent && lib(n.parent)); }
  function foldOf(n) {
    if (n.fold) { return n.fold; }
    var lifted = [], count = 0, pk = new Map(), stack = n.kids.slice();
    while (stack.length) {
      var c = stack.pop();
      if (!lib(c)) { lifted.push(c); continue; }
      count++;
      var p = D.pkg[c.f];
      pk.set(p, (pk.get(p) || 0) + c.total);
      for (var i = 0; i < c.kids.length; i++) { stack.push(c.kids[i]); }
    }
    lifted.sort(function (a, b) { return b.total - a.total; });
    var pkgs = Array.from(pk.keys()).sort(function (a, b) { return pk.get(b) - pk.get(a); });
    var rest = n.total - n.self - lifted.reduce(function (a, c) { return a + c.total; }, 0);
    n.fold = { lifted: lifted, count: count, pkgs: pkgs, total: Math.max(rest, 0), node: null };
    return n.fold;
  }
  function groupOf(n) {
    var f = foldOf(n);
    if (!f.node) { f.node = { group: true, head: n, total: f.total, self: 0, calls: 0, f: -1, thr: n.thr }; }
    return f.node;
  }
  function groupLabel(g) {
    var f = foldOf(g.head), p = f.pkgs.slice(0, 3).join(", ") + (f.pkgs.length > 3 ? ", \u2026" : "");
    return g.head.open ? "\u25be " + f.count + " library frames shown (" + p + ") \u2014 click to fold"
      : "\u25b8 " + f.count + " frames hidden (" + p + ")";
  }
  // What a node shows below it: a folded head shows the program's own calls found inside
  // its run and the group row; everything else its real children.
  function dkids(n) {
    if (n.group) { return []; }
    if (isHead(n) && foldOf(n).count > 0) {
      var g = groupOf(n);
      if (n.open) { return [g].concat(n.kids); }
      return foldOf(n).lifted.concat([g]).sort(function (a, b) { return b.total - a.total; });
    }
    return n.kids;
  }

  // ---- the call tree view ----
  function shown(n, kids) {  // the children listed, and those summarised on a "more" row
    if (n.showAll || n.group) { return [kids, []]; }
    var base = n.thr ? n.thr.total : root.total, a = [], b = [];
    kids.forEach(function (c) { (c.group || c.reveal || c.total >= SHOW_SHARE * base ? a : b).push(c); });
    return [a, b];
  }
  function openBelow(start) {  // open the hot paths below these nodes (first load, an opened fold)
    var queue = start.slice(), opened = 0;
    for (var i = 0; i < queue.length && opened < MAX_OPEN; i++) {
      var kids = shown(queue[i], dkids(queue[i]))[0];
      kids.forEach(function (c) {
        if (!c.group && c.total >= OPEN_SHARE * (c.thr ? c.thr.total : 1)) {
          c.expanded = true; opened++; queue.push(c);
        }
      });
    }
  }
  function openFirst() {
    root.kids.forEach(function (t) { t.expanded = true; });
    openBelow(root.kids);
  }
  // [the recursion's last level, levels folded] when n's one child starts a chain of
  // single calls to n's own function long enough to fold, else null
  function recursion(n, list) {
    if (n.unchain || n.f < 0 || list.length !== 1 || list[0].f !== n.f || list[0].group) { return null; }
    var x = list[0], levels = 0;
    while (x.kids.length === 1 && x.kids[0].f === n.f && dkids(x).length === 1) { x = x.kids[0]; levels++; }
    if (levels < 3) { return null; }
    x.expanded = x.expanded || x.total >= OPEN_SHARE * (x.thr ? x.thr.total : 1);
    return [x, levels];
  }
  function heat(share) {
    return share >= 0.5 ? "h5" : share >= 0.2 ? "h4" : share >= 0.1 ? "h3" : share >= 0.03 ? "h2"
      : share >= 0.01 ? "h1" : "h0";
  }
  function row(n, depth, kind, text) {
    var r = el("div", "row " + kind), base = n.thr ? n.thr.total : root.total;
    var hasKids = !n.group && kind !== "more" && dkids(n).length > 0;
    var tw = el("span", "tw", hasKids ? (n.expanded ? "\u25be" : "\u25b8") : "");
    r.appendChild(tw);
    var quiet = n.group && n.head.open;
    r.appendChild(el("span", "t " + heat(n.total / (base || 1)), quiet ? "" : fmt(n.total)));
    r.appendChild(el("span", "s", n.group || n.thread || kind === "more" ? "" : fmt(n.self)));
    var ind = el("span", "ind", depth > MAX_INDENT ? "[" + depth + "] " : "");
    ind.style.width = (Math.min(depth, MAX_INDENT) * INDENT) + "px";
    r.appendChild(ind);
    r.appendChild(el("span", "n", text));
    if (n.f >= 0 && D.where[n.f]) {
      var w = el("span", "w", D.where[n.f]);
      w.title = D.files[n.f];
      r.appendChild(w);
    }
    r.node = n;
    r.title = "";
    return r;
  }
  function renderTree() {
    treeEl.textContent = "";
    var frag = document.createDocumentFragment(), count = 0, q = query();
    var head = el("div", "row head");
    [["tw", ""], ["t", "total"], ["s", "self"], ["n", "function   file:line"]].forEach(function (c) {
      head.appendChild(el("span", c[0], c[1]));
    });
    frag.appendChild(head);
    var stack = [];
    for (var i = root.kids.length - 1; i >= 0; i--) { stack.push([root.kids[i], 0, null]); }
    while (stack.length && count < MAX_ROWS) {
      var item = stack.pop(), n = item[0], depth = item[1];
      if (item[2]) {  // a "more" row: [count, total]
        var more = { total: item[2][1], self: 0, thr: n.thr, f: -1, moreOf: n };
        frag.appendChild(row(more, depth, "more", "\u2026 " + item[2][0] + " more under " +
          (100 * SHOW_SHARE) + "% (click to list)"));
        count++;
        continue;
      }
      var kind = n.group ? "group" : n.thread ? "thread" : n.gapRow || n.chainOf ? "more"
        : lib(n) ? "lib" : "own";
      var r = row(n, depth, kind, name(n));
      if (q && !n.group && name(n).toLowerCase().indexOf(q) >= 0) { r.className += " match"; }
      frag.appendChild(r);
      count++;
      if (n.group || !n.expanded) { continue; }
      var parts = shown(n, dkids(n)), list = parts[0], rest = parts[1], below = [];
      var chain = recursion(n, list);
      if (chain) {  // a recursion: one row for its middle, as the text report folds it
        below.push([{ total: list[0].total, self: 0, thr: n.thr, f: -1, chainOf: n,
          label: "\u2506 " + chain[1] + " more levels of " + name(n) + " (recursion): click to show" }, depth + 1, null]);
        list = [chain[0]];
      }
      list.forEach(function (c) { below.push([c, depth + 1, null]); });
      if (rest.length) {
        below.push([n, depth + 1, [rest.length, rest.reduce(function (a, c) { return a + c.total; }, 0)]]);
      }
      if (trimmed && n.gap > 0 && !(isHead(n) && !n.open && foldOf(n).count > 0)) {  // else in the group
        below.push([n, depth + 1, null, true]);
      }
      for (var j = below.length - 1; j >= 0; j--) {
        if (below[j][3]) {
          stack.push([{ total: n.gap, self: 0, thr: n.thr, f: -1, gapRow: true,
            label: "\u2026 smaller calls left out of this page" }, depth + 1, null]);
        } else { stack.push(below[j]); }
      }
    }
    if (stack.length) { frag.appendChild(el("div", "row more", "\u2026 the view stops at " + MAX_ROWS + " rows")); }
    treeEl.appendChild(frag);
  }
  treeEl.addEventListener("click", function (e) {
    var r = e.target.closest(".row");
    if (!r || !r.node) { return; }
    var n = r.node;
    if (n.group) {
      n.head.open = !n.head.open;
      if (n.head.open) {  // show where the library's time goes: its hot paths open too
        var libs = n.head.kids.filter(lib);
        libs.forEach(function (c) { c.expanded = true; });
        openBelow(libs);
      }
    }
    else if (n.moreOf) { n.moreOf.showAll = true; }
    else if (n.chainOf) { n.chainOf.unchain = true; }
    else if (n.gapRow) { return; }
    else { n.expanded = !n.expanded; }
    renderTree();
  });


  // ---- search: highlight, and open the branches and folds that hide a match ----
  function query() { return search.value.trim().toLowerCase(); }
  var revealed = [];
  function reveal(q) {
    revealed.forEach(function (n) { n.reveal = false; });
    revealed = [];
    var found = everything.filter(function (n) { return n.f >= 0 && D.names[n.f].toLowerCase().indexOf(q) >= 0; });
    found.sort(function (a, b) { return b.total - a.total; });
    found.slice(0, REVEAL).forEach(function (m) {  // the largest matches: their paths open
      var inside = false;
      for (var a = m.parent, c = m; a; c = a, a = a.parent) {
        a.expanded = true; a.unchain = true;
        if (!c.reveal) { c.reveal = true; revealed.push(c); }  // listed although small
        if (lib(a) && !isHead(a)) { inside = true; }
        if (isHead(a) && (inside || lib(m))) { a.open = a.open || a !== m; inside = false; }
      }
      if (lib(m) && !isHead(m)) {  // m itself sits inside a run: open its head
        for (var h = m.parent; h; h = h.parent) { if (isHead(h)) { h.open = true; break; } }
      }
    });
    var sum = 0, stack = root.kids.slice();
    while (stack.length) {  // outermost matches only, so nested ones are not counted twice
      var n = stack.pop();
      if (n.f >= 0 && D.names[n.f].toLowerCase().indexOf(q) >= 0) { sum += n.total; continue; }
      for (var i = 0; i < n.kids.length; i++) { stack.push(n.kids[i]); }
    }
    return found.length ? found.length + " matches, " + fmt(sum) + " (" + pct(sum, root.total) + ")"
      : "no match";
  }

  // ---- hot spots: the report's (self time by function, over all paths) ----
  function renderHot() {
    var hot = $("hot"), t = root.kids[0];
    root.kids.forEach(function (x) { if (x.total > t.total) { t = x; } });
    if (!t || !t.hot || !t.hot.length) { return; }
    hot.appendChild(el("span", "", "hot spots (" + (D.mode === "memory" ? "self bytes" : "self time") +
      (root.kids.length > 1 ? ", " + t.label : "") + "): "));
    t.hot.forEach(function (h) {
      var s = el("span", "spot");
      s.appendChild(el("b", "", D.names[h[0]]));
      s.appendChild(document.createTextNode(" " + fmt(h[1]) + " " + pct(h[1], t.total)));
      s.title = D.where[h[0]] ? D.files[h[0]] + ":" + D.where[h[0]].split(":").pop() : "";
      s.addEventListener("click", function () { search.value = D.names[h[0]]; onSearch(); });
      hot.appendChild(s);
      hot.appendChild(document.createTextNode(" "));
    });
  }

  // ---- the flame graph: the same folded tree as boxes (icicle, or flame upside down) ----
  var zoom = root, flame = false;
  function hue(n) {
    if (n.group) { return "#ddd"; }
    var mod = D.pkg[n.f] || "", h = 0;
    for (var i = 0; i < mod.length; i++) { h = (h * 31 + mod.charCodeAt(i)) >>> 0; }
    return lib(n) ? "hsl(" + (20 + h % 30) + ",70%," + (70 + h % 12) + "%)" : "hsl(" + (200 + h % 30) + ",70%,72%)";
  }
  function renderGraph() {
    chart.textContent = "";
    var width = chart.clientWidth || 800, base = zoom.total || 1, count = 0, maxDepth = 0;
    var frag = document.createDocumentFragment(), q = query(), anc = [];
    for (var a = zoom.dparent; a; a = a.dparent) { anc.push(a); }
    anc.reverse();
    function add(n, d, x, w, cls) {
      maxDepth = Math.max(maxDepth, d);
      var e = el("div", "fr" + cls + (n.group ? " grp" : ""), name(n));
      e.style.left = (100 * x) + "%"; e.style.width = (100 * w) + "%";
      e.depth = d; e.node = n;
      e.style.background = n === root || n.thread ? "#ccc" : hue(n);
      if (q && !n.group && n.f >= 0 && name(n).toLowerCase().indexOf(q) >= 0) { e.className += " match"; }
      frag.appendChild(e);
      count++;
    }
    anc.forEach(function (n, i) { add(n, i, 0, 1, " anc"); });
    var stack = [[zoom, anc.length, 0, 1]];
    while (stack.length && count < MAX_DIVS) {
      var item = stack.pop(), n = item[0], x = item[2], w = item[3];
      add(n, item[1], x, w, "");
      var cx = x;
      (n === root ? n.kids : dkids(n)).forEach(function (c) {
        var cw = c.total / base;
        c.dparent = n;
        if (cw * width >= 1) { stack.push([c, item[1] + 1, cx, cw]); }
        cx += cw;
      });
    }
    for (var c = frag.firstChild; c; c = c.nextSibling) {
      c.style.top = ((flame ? maxDepth - c.depth : c.depth) * ROW) + "px";
    }
    chart.style.height = ((maxDepth + 1) * ROW) + "px";
    chart.appendChild(frag);
    chart.className = q ? "searching" : "";
    return fmt(zoom.total) + " shown" + (count >= MAX_DIVS ? " (cut at " + MAX_DIVS + " boxes)" : "");
  }
  function tipFor(n, e) {
    tip.textContent = "";
    tip.appendChild(el("b", "", name(n)));
    var lines = n.span ? [fmt(n.span[3] - n.span[2]) + " from " + fmt(n.span[2])]
      : [fmt(n.total) + " total (" + pct(n.total, root.total) + " of all)" +
         (n.group ? "" : ", " + fmt(n.self) + " self, " + n.calls + " calls")];
    if (n.f >= 0 && D.files[n.f]) { lines.push(D.files[n.f] + ":" + D.where[n.f].split(":").pop()); }
    lines.forEach(function (t) { tip.appendChild(document.createElement("br")); tip.appendChild(document.createTextNode(t)); });
    tip.style.display = "block";
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 320) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  }
  chart.addEventListener("mousemove", function (e) {
    if (!e.target.node) { tip.style.display = "none"; return; }
    tipFor(e.target.node, e);
  });
  chart.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  chart.addEventListener("click", function (e) {
    var n = e.target.node;
    if (!n) { return; }
    if (view === "time") { window0 = [n.span[2], n.span[3]]; }
    else if (n.group) { n.head.open = !n.head.open; }
    else { zoom = n; }
    render();
  });

  // ---- the timeline: spans of a profile recorded with --timeline ----
  var window0 = null;
  function renderTime() {
    chart.textContent = "";
    var S = D.spans, width = chart.clientWidth || 800;
    var lo = Infinity, hi = -Infinity;
    S.forEach(function (s) { lo = Math.min(lo, s[2]); hi = Math.max(hi, s[3]); });
    var w0 = window0 || [lo, hi], span = Math.max(w0[1] - w0[0], 1), q = query();
    var frag = document.createDocumentFragment(), top = 0, count = 0, lane = -1, laneTop = 0, deepest = 0;
    for (var i = 0; i < S.length && count < MAX_DIVS; i++) {
      var s = S[i];
      if (s[0] !== lane) {
        top = laneTop + (lane < 0 ? 0 : (deepest + 1) * ROW + 8);
        lane = s[0]; laneTop = top + ROW; deepest = 0;
        var head = el("div", "fr anc", "thread " + D.threads[lane].label);
        head.style.left = "0"; head.style.width = "100%"; head.style.top = top + "px";
        frag.appendChild(head);
      }
      deepest = Math.max(deepest, s[4]);
      if (s[3] < w0[0] || s[2] > w0[1]) { continue; }
      var x = (Math.max(s[2], w0[0]) - w0[0]) / span, w = (Math.min(s[3], w0[1]) - Math.max(s[2], w0[0])) / span;
      if (w * width < 0.5) { continue; }
      var n = { f: s[1], span: s, total: s[3] - s[2], self: 0, calls: 1 };
      var e = el("div", "fr", name(n));
      e.style.left = (100 * x) + "%"; e.style.width = (100 * w) + "%";
      e.style.top = (laneTop + s[4] * ROW) + "px"; e.style.background = hue(n); e.node = n;
      if (q && name(n).toLowerCase().indexOf(q) >= 0) { e.className += " match"; }
      frag.appendChild(e);
      count++;
    }
    chart.style.height = (laneTop + (deepest + 1) * ROW) + "px";
    chart.appendChild(frag);
    chart.className = q ? "searching" : "";
    return fmt(w0[1] - w0[0]) + " of " + fmt(hi - lo) + " shown" + (count >= MAX_DIVS ? " (cut)" : "");
  }

  // ---- views, controls, first render ----
  var view = "tree", searchNote = "";
  var MEASURED = D.mode === "memory" ? ({ peak_bytes: "alive at the peak", leaked_bytes: "alive at the end" }[D.metric] ||
    "allocated") : D.mode === "sample" ? "sampled" : D.mode === "trace" ? "traced" : "in all";
  function render() {
    tip.style.display = "none";
    treeEl.classList.toggle("hidden", view !== "tree");
    $("hot").classList.toggle("hidden", view !== "tree");
    chart.classList.toggle("hidden", view === "tree");
    $("flip").classList.toggle("hidden", view !== "graph");
    $("reset").classList.toggle("hidden", view === "tree");
    ["tree", "graph", "time"].forEach(function (v) { $("v-" + v).classList.toggle("on", v === view); });
    var what = "";
    if (view === "tree") { renderTree(); what = fmt(root.total) + " " + MEASURED; }
    else if (view === "graph") { what = renderGraph(); }
    else { what = renderTime(); }
    status.textContent = what + (searchNote ? " \u2014 " + searchNote : "");
  }
  function onSearch() {
    var q = query();
    searchNote = q ? reveal(q) : "";
    render();
    var first = view === "tree" && q ? treeEl.querySelector(".row.match") : null;
    if (first) { first.scrollIntoView({ block: "center" }); }
  }
  $("v-tree").addEventListener("click", function () { view = "tree"; render(); });
  $("v-graph").addEventListener("click", function () { view = "graph"; render(); });
  $("v-time").addEventListener("click", function () { view = "time"; render(); });
  if (!D.spans.length) {
    $("v-time").disabled = true;
    $("v-time").title = D.mode === "memory" ? "a memory profile has no timeline"
      : "no timeline recorded (profkit run --timeline records one)";
  }
  $("flip").addEventListener("click", function (e) {
    flame = !flame; e.target.textContent = flame ? "icicle view" : "flame view"; render();
  });
  $("reset").addEventListener("click", function () { zoom = root; window0 = null; render(); });
  foldBox.addEventListener("change", function () { folding = foldBox.checked; render(); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && view === "graph") { zoom = zoom.dparent || root; render(); }
    if (e.key === "Escape" && view === "time") { window0 = null; render(); }
  });
  var timer = null;
  search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(onSearch, 150); });
  window.addEventListener("resize", function () { if (view !== "tree") { render(); } });
  if (trimmed || D.left.spans) {
    var parts = [];
    if (trimmed) {
      parts.push("this page keeps the " + everything.length.toLocaleString() + " largest call-tree nodes: " +
        D.left.nodes.toLocaleString() + " smaller subtrees (" + fmt(D.left.ns) + " in all, each " +
        fmt(D.left.largest) + " or less) are left out");
    }
    if (D.left.spans) { parts.push(D.left.spans.toLocaleString() + " shorter timeline spans are left out"); }
    $("note").textContent = "Big profile: " + parts.join("; ") + ". `profkit report` reads the whole profile.";
  }
  renderHot();
  openFirst();
  // "#search=text" in the address pre-fills the search box (handy for links and tests);
  // "#view=graph" (or time) opens that view
  var m = /(?:^#|&)search=([^&]*)/.exec(location.hash), v = /(?:^#|&)view=(\w+)/.exec(location.hash);
  if (v && (v[1] === "graph" || (v[1] === "time" && D.spans.length))) { view = v[1]; }
  if (m) { search.value = decodeURIComponent(m[1]); onSearch(); } else { render(); }
})();
