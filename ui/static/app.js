// pipes status page: refreshes the page every 2 s from the JSON API named
// by <body data-api>. Plain JavaScript, no build step; the page works
// without it (a static snapshot). It writes text only (textContent), never
// HTML.
(function () {
  "use strict";
  var api = document.body.getAttribute("data-api");
  if (!api) return;
  var live = document.querySelector("[data-live]");

  function get(obj, path) {
    var parts = path.split(".");
    for (var i = 0; i < parts.length; i++) {
      if (obj === null || obj === undefined) return undefined;
      obj = obj[parts[i]];
    }
    return obj;
  }

  function duration(s) {
    s = Math.round(s);
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m" + (s % 60) + "s";
    return Math.floor(m / 60) + "h" + (m % 60) + "m" + (s % 60) + "s";
  }

  var formats = {
    rate: function (v) { return v >= 100 ? v.toFixed(0) + "/s" : v.toFixed(1) + "/s"; },
    int: function (v) { return v.toFixed(0); },
    age: function (v) { return v === null || v === undefined ? "–" : duration(v); },
    clock: function (v) { return v ? new Date(v).toISOString().substring(11, 19) + " UTC" : "–"; },
    depth: function (d) {
      if (!d) return "–";
      return d.inFlight < 0 ? String(d.visible) : d.visible + " (" + d.inFlight + " in flight)";
    }
  };

  function sparkPoints(series, sampleSeconds) {
    if (!series || !series.length || !sampleSeconds) return "";
    var top = 0, i;
    for (i = 0; i < series.length; i++) top = Math.max(top, series[i]);
    var slots = Math.max(1, Math.min(900 / sampleSeconds, series.length - 1)), w = 120, h = 24;
    var start = w - (series.length - 1) * w / slots, pts = [];
    for (i = 0; i < series.length; i++) {
      var y = top > 0 ? h - 1 - series[i] / top * (h - 2) : h - 1;
      pts.push(Math.max(0, start + i * w / slots).toFixed(1) + "," + y.toFixed(1));
    }
    return pts.join(" ");
  }

  function fill(el, data) {
    var fields = el.querySelectorAll("[data-field]");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i], v = get(data, f.getAttribute("data-field"));
      var fmt = formats[f.getAttribute("data-format")];
      var text = fmt ? fmt(v) : (v === null || v === undefined ? "" : String(v));
      if (f.textContent !== text) f.textContent = text;
      if (f.hasAttribute("data-state")) f.setAttribute("data-state", text);
      if (f.hasAttribute("data-level-of")) f.setAttribute("data-level", get(data, f.getAttribute("data-level-of")) || "");
    }
    var sparks = el.querySelectorAll("[data-spark]");
    for (var j = 0; j < sparks.length; j++) {
      var s = sparks[j];
      s.setAttribute("points", sparkPoints(get(data.sparklines, s.getAttribute("data-spark")), data.sampleSeconds));
    }
    var shows = el.querySelectorAll("[data-show]");
    for (var k = 0; k < shows.length; k++) {
      shows[k].hidden = !get(data, shows[k].getAttribute("data-show"));
    }
  }

  function time(iso) {
    var d = new Date(iso);
    return d.toISOString().substring(11, 19) + " UTC";
  }

  function cell(tr, text, cls, label) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    if (label) td.setAttribute("data-label", label); // a phone's card
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function failures(data) {
    var tbody = document.querySelector("[data-failures]");
    if (!tbody || !data.failures) return;
    var first = tbody.querySelector("tr a");
    var newest = data.failures.length ? String(data.failures[0].seq) : "";
    if ((first ? first.textContent : "") === newest) return;
    var base = tbody.getAttribute("data-failures");
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    if (!data.failures.length) {
      var empty = document.createElement("tr");
      cell(empty, "No failure yet.").colSpan = 6;
      tbody.appendChild(empty);
      return;
    }
    data.failures.forEach(function (f) {
      var tr = document.createElement("tr");
      var td = document.createElement("td");
      td.setAttribute("data-label", "#");
      var a = document.createElement("a");
      a.href = base + f.seq;
      a.textContent = String(f.seq);
      td.appendChild(a);
      tr.appendChild(td);
      cell(tr, time(f.at), "", "Time");
      cell(tr, f.messageId, "id", "Message id");
      cell(tr, f.stage, "", "Stage");
      cell(tr, String(f.attempts), "num", "Attempts");
      cell(tr, f.error, "err", "Error");
      tbody.appendChild(tr);
    });
  }

  function render(data) {
    var list = data.pipes || [data];
    list.forEach(function (p) {
      var rows = document.querySelectorAll("tr[data-pipe]");
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute("data-pipe") === p.name) fill(rows[i], p);
      }
    });
    var summary = document.querySelector("[data-summary]");
    if (summary && data.summary) fill(summary, data.summary);
    document.dispatchEvent(new CustomEvent("pipes:data", { detail: data })); // dash.js
    if (!data.pipes) {
      var sections = document.querySelectorAll("main section");
      for (var i = 0; i < sections.length; i++) fill(sections[i], data);
      failures(data);
    }
    if (live) live.textContent = "live · " + new Date().toISOString().substring(11, 19) + " UTC";
  }

  function tick() {
    fetch(api, { headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(render)
      .catch(function () { if (live) live.textContent = "offline: retrying"; })
      .then(function () { setTimeout(tick, 2000); });
  }
  setTimeout(tick, 2000);
})();
