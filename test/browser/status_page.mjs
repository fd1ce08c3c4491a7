// End-to-end test of the status page in headless Chromium (Debian's
// chromium, driven by playwright-core from .ci/browser; no browser
// download). Started by cmd/pipes' TestStatusPageInABrowser, which runs a
// pipe against the local SQS server with --ui and passes:
//   PIPES_UI_URL     the page's base URL
//   PIPES_UI_TOKEN   the token of its actions
//   PIPES_PIPE       the pipe's name
//   PIPES_DOWN_PIPE  a second pipe (a long name) whose source is down
//   PIPES_DLQ_COUNT  how many messages its dead-letter queue holds
//   PIPES_ARTIFACTS  the folder for screenshots
//   PIPES_PLAYWRIGHT the package.json of .ci/browser
//   PIPES_CHROMIUM   the browser (default /usr/bin/chromium)
// It prints one JSON line of findings on stdout and exits 1 on the first
// failed step (with the reason on stderr).
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const base = env("PIPES_UI_URL");
const token = env("PIPES_UI_TOKEN");
const name = env("PIPES_PIPE");
const downName = env("PIPES_DOWN_PIPE");
const dlqCount = Number(env("PIPES_DLQ_COUNT"));
const artifacts = env("PIPES_ARTIFACTS");
const require = createRequire(env("PIPES_PLAYWRIGHT"));
const { chromium } = require("playwright-core");

const found = {};
const step = (s) => process.stderr.write(`step: ${s}\n`);
const shot = async (page, file, opts = {}) => page.screenshot({ path: join(artifacts, file), ...opts });

// overflow runs in the page: how far it scrolls sideways, and the pipe
// names broken mid-word (a line of the name that ends other than after a
// "-", "_" or "."; on a phone a long name may wrap after its hyphens).
const overflow = () => {
  const brokenMidWord = (a) => {
    const text = a.firstChild;
    if (!text || text.nodeType !== 3) return false;
    const r = document.createRange();
    let top = null;
    for (let i = 0; i < text.length; i++) {
      r.setStart(text, i);
      r.setEnd(text, i + 1);
      const t = r.getBoundingClientRect().top;
      if (top !== null && t > top + 1 && !/[-_.]/.test(text.data[i - 1])) return true;
      top = t;
    }
    return false;
  };
  // spill is how far a table reaches past main's content box (into its
  // padding, before the page itself scrolls).
  const main = document.querySelector("main");
  const edge = main.getBoundingClientRect().right - parseFloat(getComputedStyle(main).paddingRight);
  const tables = [...document.querySelectorAll("main table")];
  const spill = Math.max(0, ...tables.map((t) => t.getBoundingClientRect().right - edge));
  return {
    scroll: document.documentElement.scrollWidth - window.innerWidth,
    spill,
    spilling: tables.filter((t) => t.getBoundingClientRect().right - edge > 1).map((t) => t.className + ": " + (t.caption?.textContent.trim() ?? "")),
    brokenNames: [...document.querySelectorAll("table.pipes th.name a")].filter(brokenMidWord).map((a) => a.textContent),
  };
};
found.overflow = {};
async function fits(page, where) {
  found.overflow[where] = await page.evaluate(overflow);
}

// a11yCheck runs in the page: every table has a caption and scoped column
// headers, every sparkline and input a label, every text a contrast of at
// least 4.5:1 (WCAG AA) against its background.
const a11yCheck = () => {
    const problems = [];
    for (const t of document.querySelectorAll("table")) {
      if (!t.querySelector("caption")) problems.push("a table without a caption");
      for (const th of t.querySelectorAll("thead th")) if (th.getAttribute("scope") !== "col") problems.push("a header without scope");
    }
    for (const svg of document.querySelectorAll("svg")) if (!svg.getAttribute("aria-label")) problems.push("an unlabelled sparkline");
    for (const i of document.querySelectorAll("input:not([type=hidden])")) if (!i.labels || !i.labels.length) problems.push("an input without a label");
    const lum = (c) => {
      const [r, g, b] = c.match(/\d+(\.\d+)?/g).slice(0, 3).map(Number).map((v) => {
        v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const bg = (el) => {
      for (; el; el = el.parentElement) {
        const c = getComputedStyle(el).backgroundColor;
        if (c && !/rgba\(0, 0, 0, 0\)|transparent/.test(c)) return c;
      }
      return "rgb(255, 255, 255)";
    };
    let worst = 21;
    for (const el of document.querySelectorAll("body *")) {
      if (!el.childNodes.length || ![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
      const a = lum(getComputedStyle(el).color), b = lum(bg(el));
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      worst = Math.min(worst, ratio);
      if (ratio < 4.5) problems.push(`contrast ${ratio.toFixed(2)} on <${el.tagName.toLowerCase()}> "${el.textContent.trim().slice(0, 30)}"`);
    }
    return { problems, worstContrast: Number(worst.toFixed(2)) };
  };
found.a11y = { problems: [], worstContrast: 21 };
async function a11y(page, where) {
  const r = await page.evaluate(a11yCheck);
  found.a11y.problems.push(...r.problems.map((p) => `${where}: ${p}`));
  found.a11y.worstContrast = Math.min(found.a11y.worstContrast, r.worstContrast);
}

const profile = mkdtempSync(join(tmpdir(), "pipes-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.PIPES_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run"],
  viewport: { width: 1280, height: 800 },
});
const cspErrors = [];
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(60000);
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text()); });
  page.on("pageerror", (e) => cspErrors.push(String(e)));

  step("the overview lists the pipe and its counts move");
  await page.goto(base + "/");
  const row = page.locator(`tr[data-pipe="${name}"]`);
  await row.waitFor();
  const received = row.locator('[data-field="totals.received"]');
  const first = Number(await received.textContent());
  await page.waitForFunction(([sel, n]) => Number(document.querySelector(sel).textContent) > n,
    [`tr[data-pipe="${name}"] [data-field="totals.received"]`, first]);
  found.receivedBefore = first;
  found.receivedAfter = Number(await received.textContent());
  found.state = await row.locator('[data-field="state"]').textContent();
  await page.waitForFunction((sel) => document.querySelector(sel).getAttribute("points") !== "",
    `tr[data-pipe="${name}"] [data-spark="received"]`);
  step("the overview fits 1280×800 and marks the failing pipe by a word and a colour");
  await fits(page, "overview 1280");
  const badge = row.locator('[data-field="health.word"]');
  found.health = { word: (await badge.textContent()).trim(), level: await badge.getAttribute("data-level"),
    rowMarked: await row.evaluate((tr) => getComputedStyle(tr.cells[0]).boxShadow !== "none") };
  found.summary = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll("[data-summary] [data-field]")]
    .map((e) => [e.getAttribute("data-field"), e.textContent.trim()])));
  found.visibleColumns = await page.evaluate(() => [...document.querySelectorAll("table.pipes thead th")]
    .filter((th) => th.getBoundingClientRect().right <= window.innerWidth).map((th) => th.textContent.trim()));
  step("the pipe whose source is down is not ready, with its reason, and its long name unbroken");
  const down = page.locator(`tr[data-pipe="${downName}"]`);
  await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.trim() === "not ready",
    `tr[data-pipe="${downName}"] [data-field="state"]`);
  const downBadge = down.locator('[data-field="health.word"]');
  // lines counts the rectangles of the name's link: 1 when on one line.
  const lines = () => down.locator("th.name a").evaluate((a) => a.getClientRects().length);
  found.down = { state: (await down.locator('[data-field="state"]').textContent()).trim(),
    word: (await downBadge.textContent()).trim(), level: await downBadge.getAttribute("data-level"),
    reason: (await down.locator('[data-field="reason"]').textContent()).trim(), names: { 1280: await lines() } };
  await shot(page, "overview.png");

  step("accessibility: labels, semantic tables, contrast");
  await a11y(page, "overview");

  step("readable on a phone: one card per pipe, nothing scrolls sideways");
  await page.setViewportSize({ width: 390, height: 844 });
  await fits(page, "overview 390");
  found.down.names[390] = await lines();
  found.phoneOverflow = found.overflow["overview 390"].scroll;
  await shot(page, "overview-phone.png", { fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });

  step("the detail view: flow, charts with data points and a hover readout, grouped failures");
  await page.click(`th a[href="/pipes/${name}"]`);
  await page.waitForURL(`**/pipes/${name}`);
  // Measured values, not timestamps: every rate has at least 5, and the
  // depths at least one reading each (the first was read when the
  // overview was opened; then at most every 30 s).
  await page.waitForFunction(() => {
    const drawn = (chart) => JSON.parse(document.querySelector(`[data-chart="${chart}"] .plot`)?.getAttribute("data-nonnull") || "{}");
    const rates = drawn("rates"), depths = drawn("depths");
    return rates.received >= 5 && Object.values(rates).every((n) => n >= 5) && depths.queue >= 1 && depths.dlq >= 1;
  }, null, { timeout: 45000 });
  found.charts = await page.evaluate(() => [...document.querySelectorAll("[data-chart]")].map((f) => ({
    chart: f.getAttribute("data-chart"), points: Number(f.querySelector(".plot").getAttribute("data-points") || 0),
    nonnull: JSON.parse(f.querySelector(".plot").getAttribute("data-nonnull") || "{}"),
    canvas: f.querySelectorAll("canvas").length,
  })));
  const plot = page.locator('[data-chart="rates"] .u-over');
  const box = await plot.boundingBox();
  await page.mouse.move(box.x + box.width - 4, box.y + box.height / 2);
  await page.waitForFunction(() => /received/.test(document.querySelector('[data-chart="rates"] [data-readout]').textContent));
  found.readout = (await page.locator('[data-chart="rates"] [data-readout]').textContent()).trim();
  found.window = (await page.locator("[data-window]").textContent()).trim();
  found.flow = await page.evaluate(() => [...document.querySelectorAll("li[data-step]")].map((li) => ({
    step: li.getAttribute("data-step"), in: Number(li.querySelector(".step-in span").textContent),
    stopped: li.querySelector(".step-out").hidden ? 0 : Number(li.querySelector(".step-out span").textContent),
  })));
  found.groups = await page.evaluate(() => [...document.querySelectorAll("[data-groups] tr[data-group]")].map((tr) => ({
    count: Number(tr.querySelector("[data-count]").textContent), stage: tr.cells[1].textContent,
    error: tr.querySelector("summary").textContent, example: tr.querySelector(".full").textContent,
    link: tr.querySelector("td.id a") ? tr.querySelector("td.id a").getAttribute("href") : "",
  })));
  found.errorWrap = await page.evaluate(() => [...document.querySelectorAll("[data-groups] td.err-text, [data-failures] td.err")]
    .every((td) => getComputedStyle(td).wordBreak === "normal"));
  found.failuresTotal = Number(await page.locator('[data-field="failuresTotal"]').first().textContent());
  await page.locator("[data-groups] summary").first().click();
  found.groupOpen = await page.locator("[data-groups] details").first().evaluate((d) => d.open);
  await fits(page, "detail 1280");
  await a11y(page, "detail (charts)");
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.mouse.move(1, 1);
  await shot(page, "detail-top.png", { fullPage: true, clip: { x: 0, y: 0, width: 1280, height: 1180 } });
  await page.locator("section.flow").screenshot({ path: join(artifacts, "flow.png") });
  await page.locator("section.charts").screenshot({ path: join(artifacts, "charts.png") });
  await page.locator('section[aria-labelledby="groups-h"]').screenshot({ path: join(artifacts, "failures-grouped.png") });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300);
  await fits(page, "detail 390");
  await shot(page, "detail-phone.png", { fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });

  step("the detail view shows a failure, which opens");
  const failureLink = page.locator("[data-failures] tr a").first();
  await failureLink.waitFor();
  await failureLink.click();
  await page.waitForURL(/\/failures\/\d+$/);
  found.failure = {
    error: (await page.locator("dl.failure dd.err").textContent()).trim(),
    id: (await page.locator("dl.failure dd.id").textContent()).trim(),
    sample: (await page.locator("dl.failure pre.sample").count()) ? await page.locator("dl.failure pre.sample").textContent() : "",
  };
  await a11y(page, "failure");
  await fits(page, "failure 1280");
  await shot(page, "failure.png");
  await page.goBack();
  await page.waitForURL(`**/pipes/${name}`);

  step("an action without the token is refused");
  found.noToken = await page.evaluate(async (n) => (await fetch(`/api/pipes/${n}/pause`, { method: "POST" })).status, name);

  step("the DLQ depth is shown; redrive asks for confirmation and the token");
  const dlqCell = page.locator(`tr[data-pipe="${name}"] [data-field="depths.dlq"]`);
  await page.waitForFunction(([sel, n]) => document.querySelector(sel).textContent.trim().startsWith(String(n) + " "),
    [`tr[data-pipe="${name}"] [data-field="depths.dlq"]`, dlqCount], { timeout: 70000 });
  found.dlqBefore = (await dlqCell.textContent()).trim();
  await a11y(page, "detail");
  await page.click("text=Redrive the DLQ");
  await page.waitForURL(`**/pipes/${name}/confirm/redrive`);
  found.confirmLabels = await page.evaluate(() => [...document.querySelectorAll("input:not([type=hidden])")]
    .every((i) => i.labels && i.labels.length > 0));
  // A wrong token first: refused, nothing moves.
  await page.fill("#rate", "50");
  await page.fill("#token", "not-the-token");
  await page.click("button[type=submit]");
  found.wrongToken = (await page.locator(".message").textContent()).trim();
  await page.goto(`${base}/pipes/${name}/confirm/redrive`);
  await page.fill("#rate", "50");
  await page.fill("#token", token);
  await a11y(page, "confirm");
  await fits(page, "confirm 1280");
  await shot(page, "confirm.png");
  await page.click("button[type=submit]");
  await page.waitForURL(`**/pipes/${name}?done=redrive`);

  step("the redrive's progress shows the messages moved, and the DLQ empties");
  await page.waitForFunction(() => document.querySelector('[data-field="redrive.state"]').textContent === "done");
  found.moved = Number(await page.locator('[data-field="redrive.moved"]').textContent());
  await page.waitForFunction((sel) => document.querySelector(sel).textContent.trim().startsWith("0 "),
    `tr[data-pipe="${name}"] [data-field="depths.dlq"]`, { timeout: 70000 });
  found.dlqAfter = (await dlqCell.textContent()).trim();
  await page.waitForFunction(() => document.querySelector('[data-field="totals.delivered"]') !== null);
  await shot(page, "detail.png", { fullPage: true });

  step("pause and resume polling, each confirmed with the token");
  for (const action of ["pause", "resume"]) {
    await page.click(`a[href="/pipes/${name}/confirm/${action}"]`);
    await page.waitForURL(`**/pipes/${name}/confirm/${action}`);
    await page.fill("#token", token);
    await page.click("button[type=submit]");
    await page.waitForURL(`**/pipes/${name}?done=${action}`);
    found[action] = (await page.locator(`tr[data-pipe="${name}"] [data-field="state"]`).textContent()).trim();
  }
  found.cspErrors = cspErrors;
  process.stdout.write(JSON.stringify(found) + "\n");
} catch (e) {
  process.stderr.write(`failed: ${e && e.stack ? e.stack : e}\nfound so far: ${JSON.stringify(found)}\n`);
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
