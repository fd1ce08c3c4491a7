// pipes live tail: reads the pipe's Server-Sent Events (table[data-tail])
// and adds one row per event, newest first, keeping the last 200. Writes
// text only (textContent), never HTML.
(function () {
  "use strict";
  var table = document.querySelector("table[data-tail]");
  if (!table || !window.EventSource) return;
  var body = table.tBodies[0];
  var state = document.querySelector("[data-tail-state]");
  var toggle = document.querySelector("[data-tail-toggle]");
  var paused = false, src = null, keep = 200;
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
  }
  function add(e) {
    var ev;
    try { ev = JSON.parse(e.data); } catch (err) { return; }
    var empty = body.querySelector("[data-tail-empty]");
    if (empty) body.removeChild(empty);
    var tr = document.createElement("tr");
    tr.setAttribute("data-stage", ev.stage);
    tr.setAttribute("data-message", ev.messageId);
    cell(tr, new Date(ev.at).toISOString().substring(11, 23));
    cell(tr, ev.messageId, "id");
    cell(tr, ev.stage);
    cell(tr, ev.detail || "", ev.detail && ev.detail.indexOf("failed") === 0 ? "err" : "");
    cell(tr, ev.sample || "", "id");
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > keep) body.deleteRow(body.rows.length - 1);
  }
  function open() {
    src = new EventSource(table.getAttribute("data-tail"));
    src.addEventListener("tap", add);
    src.onopen = function () { if (state) state.textContent = "live"; };
    src.onerror = function () { if (state) state.textContent = "reconnecting…"; };
  }
  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.textContent = paused ? "Resume" : "Pause";
      toggle.setAttribute("aria-pressed", paused ? "false" : "true");
      if (paused) { src.close(); if (state) state.textContent = "paused"; } else { open(); }
    });
  }
  open();
})();
