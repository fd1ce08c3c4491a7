// pipes status page, the dashboard parts: the detail view's charts
// (uPlot, from /api/pipes/NAME/series), its flow's stop marks and its
// failure groups (from the data app.js fetches: the pipes:data event).
// Text only (textContent), never HTML.
(function () {
  "use strict";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // clip is dash.go's clip: about 200 characters, cut at a space.
  function clip(s) {
    if (s.length <= 200) return s;
    var cut = s.lastIndexOf(" ", 200);
    return s.substring(0, cut < 100 ? 200 : cut) + " …";
  }
  function time(sec) { return new Date(sec * 1000).toISOString().substring(11, 19) + " UTC"; }
  function isoTime(iso) { return new Date(iso).toISOString().substring(11, 19) + " UTC"; }

  // The flow's stop marks and the groups follow the detail's data.
  document.addEventListener("pipes:data", function (ev) {
    var d = ev.detail;
    if (!d || d.pipes) return;
    if (d.flow && d.flow.steps) {
      d.flow.steps.forEach(function (s) {
        var li = document.querySelector('li[data-step="' + s.name + '"]');
        if (!li) return;
        li.classList.toggle("stop", s.stop);
        var b = li.querySelector("[data-stop]");
        if (b) b.hidden = !s.stop;
        var out = li.querySelector(".step-out");
        if (out) out.hidden = !s.stopped;
      });
    }
    groups(d.groups || []);
  });

  function groups(list) {
    var tbody = document.querySelector("[data-groups]");
    if (!tbody) return;
    var sig = list.map(function (g) { return g.count + "/" + g.exampleSeq; }).join(",");
    if (tbody.getAttribute("data-sig") === sig) return;
    tbody.setAttribute("data-sig", sig);
    var base = tbody.getAttribute("data-groups");
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    if (!list.length) {
      var tr0 = el("tr"), td0 = el("td", "", "No failure yet.");
      td0.colSpan = 6;
      tr0.appendChild(td0);
      tbody.appendChild(tr0);
      return;
    }
    list.forEach(function (g) {
      var tr = el("tr");
      tr.setAttribute("data-group", "");
      var cell = function (cls, text, label) { var td = el("td", cls, text); td.setAttribute("data-label", label); return td; };
      var c = cell("num", String(g.count), "Count");
      c.setAttribute("data-count", "");
      tr.appendChild(c);
      tr.appendChild(cell("", g.stage, "Stage"));
      var e = cell("err-text", undefined, "Error"), det = el("details");
      det.appendChild(el("summary", "", clip(g.error)));
      det.appendChild(el("p", "full", g.example));
      e.appendChild(det);
      tr.appendChild(e);
      tr.appendChild(cell("", isoTime(g.first), "First seen"));
      tr.appendChild(cell("", isoTime(g.last), "Last seen"));
      var ex = cell("id", undefined, "Example");
      if (g.exampleKept) {
        var a = el("a", "", g.exampleId);
        a.href = base + g.exampleSeq;
        ex.appendChild(a);
      } else ex.textContent = g.exampleId;
      tr.appendChild(ex);
      tbody.appendChild(tr);
    });
  }

  // Charts.
  var section = document.querySelector("[data-series]");
  if (!section || typeof uPlot === "undefined") return;
  var url = section.getAttribute("data-series");
  var note = section.querySelector("[data-window]");
  // Colours with at least 3:1 against white (WCAG non-text contrast).
  var C = { received: "#0b5394", delivered: "#1d6b2c", filtered: "#6b4c9a", failed: "#a61b1b", dead: "#7a4a00",
    queue: "#0b5394", dlq: "#a61b1b", conc: "#0b5394", inflight: "#1d6b2c", p50: "#0b5394", p99: "#a61b1b" };
  var defs = {
    rates: { unit: "msg/s", keys: ["received", "delivered", "filtered", "failed", "deadLettered"],
      series: [["received", C.received], ["delivered", C.delivered], ["filtered", C.filtered], ["failed", C.failed], ["dead-lettered", C.dead]],
      fmt: function (v) { return v >= 100 ? v.toFixed(0) : v.toFixed(1); } },
    depths: { unit: "messages", keys: ["queue", "dlq"], gaps: true,
      series: [["queue", C.queue], ["DLQ", C.dlq]], fmt: function (v) { return v.toFixed(0); } },
    concurrency: { unit: "batches", keys: ["concurrency", "inFlight"],
      series: [["concurrency", C.conc], ["in flight", C.inflight]], fmt: function (v) { return v.toFixed(0); } },
    latency: { unit: "ms", keys: ["p50Ms", "p99Ms"],
      series: [["p50", C.p50], ["p99", C.p99]], fmt: function (v) { return v >= 100 ? v.toFixed(0) : v.toFixed(1); } }
  };
  var charts = [];
  var range = [0, 1];

  function make(fig, def) {
    var plot = fig.querySelector(".plot"), readout = fig.querySelector("[data-readout]");
    var series = [{}];
    def.series.forEach(function (s) {
      series.push({ label: s[0], stroke: s[1], width: 2, spanGaps: !!def.gaps,
        points: { show: def.gaps ? true : function (u) { return u.data[0].length < 60; }, size: 5, fill: s[1] },
        value: function (u, v) { return v === null || v === undefined ? "–" : def.fmt(v) + " " + def.unit; } });
    });
    var opts = {
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },
      width: Math.max(240, plot.clientWidth), height: 170,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true, range: function () { return range; } },
        y: { range: function (u, lo, hi) { return [0, hi > 0 ? hi * 1.1 : 1]; } } },
      axes: [
        { stroke: "#4a4a4a", grid: { stroke: "#e4e4e4" }, ticks: { stroke: "#c8c8c8" }, label: "time (UTC)", labelSize: 18 },
        { stroke: "#4a4a4a", grid: { stroke: "#e4e4e4" }, ticks: { stroke: "#c8c8c8" }, label: def.unit, labelSize: 18, size: 52 }
      ],
      series: series,
      hooks: { setCursor: [function (u) {
        var i = u.cursor.idx;
        if (i === null || i === undefined) { readout.textContent = "Hover a chart for its values."; return; }
        var parts = [time(u.data[0][i])];
        for (var k = 1; k < u.series.length; k++) {
          var v = u.data[k][i];
          parts.push(u.series[k].label + " " + (v === null || v === undefined ? "not measured" : def.fmt(v) + " " + def.unit));
        }
        readout.textContent = parts.join(" · ");
      }] }
    };
    var data = [[]].concat(def.keys.map(function () { return []; }));
    var u = new uPlot(opts, data, plot);
    plot.setAttribute("data-ready", "");
    // The colours' key, as text: what each line is.
    var key = el("p", "key");
    def.series.forEach(function (s) {
      var sw = el("span", "swatch");
      sw.style.backgroundColor = s[1];
      var item = el("span", "key-item");
      item.appendChild(sw);
      item.appendChild(document.createTextNode(s[0]));
      key.appendChild(item);
    });
    fig.insertBefore(key, readout);
    return { u: u, def: def, plot: plot };
  }

  var figs = section.querySelectorAll("[data-chart]");
  for (var i = 0; i < figs.length; i++) {
    var def = defs[figs[i].getAttribute("data-chart")];
    if (def) charts.push(make(figs[i], def));
  }

  function load(d) {
    var t = d.t || [];
    // The window: 15 minutes, or since the first sample when the run is
    // younger (no line squashed against the right edge).
    var start = Math.max(d.now - d.historySeconds, t.length ? t[0] - d.sampleSeconds : d.now - 60);
    range = [start, d.now];
    if (note) {
      var span = d.now - start, full = span >= d.historySeconds - d.sampleSeconds;
      var ago = span < 60 ? Math.round(span) + " s" : Math.floor(span / 60) + " min " + Math.round(span % 60) + " s";
      note.textContent = (full ? "The last 15 minutes" : "Since sampling began " + ago + " ago (15 minutes are kept)") +
        ", one point per " + d.sampleSeconds + " s sample; a gap is a value not measured. Hover for values.";
    }
    charts.forEach(function (c) {
      c.u.setData([t].concat(c.def.keys.map(function (k) { return d[k] || []; })));
      c.plot.setAttribute("data-points", String(t.length));
      // The values drawn (not null: measured) of each series, by key.
      var drawn = {};
      c.def.keys.forEach(function (k, i) {
        drawn[k] = (c.u.data[i + 1] || []).filter(function (v) { return v !== null && v !== undefined; }).length;
      });
      c.plot.setAttribute("data-nonnull", JSON.stringify(drawn));
    });
    section.setAttribute("data-samples", String(t.length));
  }

  var every = 2000;
  function tick() {
    fetch(url, { headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (d) { load(d); every = Math.max(1000, Math.min(5000, d.sampleSeconds * 1000)); })
      .catch(function () { if (note) note.textContent = "Charts: the series could not be read; retrying."; })
      .then(function () { setTimeout(tick, every); });
  }
  tick();
  window.addEventListener("resize", function () {
    charts.forEach(function (c) { c.u.setSize({ width: Math.max(240, c.plot.clientWidth), height: 170 }); });
  });
})();
