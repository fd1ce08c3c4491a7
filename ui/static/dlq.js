// pipes DLQ browser: shows the redrive's progress and the DLQ depth every
// second from the pipe's JSON (<body data-api>), and offers to list the
// messages again once the redrive ended. The listing itself is not
// refreshed: each listing holds the messages while it reads them.
// Writes text only (textContent).
(function () {
  "use strict";
  var api = document.body.getAttribute("data-api");
  var box = document.querySelector("[data-dlq]");
  if (!api || !box) return;
  var relist = box.querySelector("[data-relist]");
  function depth(d) {
    if (!d) return "–";
    return d.inFlight < 0 ? String(d.visible) : d.visible + " (" + d.inFlight + " in flight)";
  }
  function set(field, text) {
    var el = box.querySelector('[data-field="' + field + '"]');
    if (el && el.textContent !== text) el.textContent = text;
  }
  function render(p) {
    set("depths.dlq", depth(p.depths && p.depths.dlq));
    var r = p.redrive, show = box.querySelector('[data-show="redrive"]');
    if (show) show.hidden = !r;
    if (!r) return;
    set("redrive.state", r.state);
    set("redrive.moved", String(r.moved));
    set("redrive.skipped", String(r.skipped));
    set("redrive.failed", String(r.failed));
    set("redrive.rate", String(r.rate));
    set("redrive.error", r.error || "");
    if (relist) relist.hidden = r.state === "running";
  }
  function tick() {
    fetch(api, { headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(render)
      .catch(function () {})
      .then(function () { setTimeout(tick, 1000); });
  }
  setTimeout(tick, 1000);
})();
