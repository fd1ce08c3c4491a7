// End-to-end test of the status page's DLQ browser and live tail in
// headless Chromium (Debian's chromium, driven by playwright-core from
// .ci/browser; no browser download). Started by cmd/pipes'
// TestDLQBrowserAndTailInABrowser, which runs a pipe with a filter against
// the local SQS server with --ui --ui-tail and passes:
//   PIPES_UI_URL     the page's base URL
//   PIPES_UI_TOKEN   the token of its actions
//   PIPES_PIPE       the pipe's name
//   PIPES_DLQ_COUNT  how many messages its dead-letter queue holds
//   PIPES_ARTIFACTS  the folder for screenshots
//   PIPES_PLAYWRIGHT the package.json of .ci/browser
//   PIPES_CHROMIUM   the browser (default /usr/bin/chromium)
// It prints one JSON line of findings on stdout and exits 1 on the first
// failed step (with the reason on stderr).
import { join } from "node:path";
import { a11yInto, launch } from "./lib.mjs";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const base = env("PIPES_UI_URL");
const token = env("PIPES_UI_TOKEN");
const name = env("PIPES_PIPE");
const dlqCount = Number(env("PIPES_DLQ_COUNT"));
const artifacts = env("PIPES_ARTIFACTS");

const found = {};
const step = (s) => process.stderr.write(`step: ${s}\n`);
const shot = async (page, file) => page.screenshot({ path: join(artifacts, file), fullPage: true });

found.a11y = { problems: [], worstContrast: 21 };
const a11y = (page, where) => a11yInto(found.a11y, page, where);

const browser = await launch(env("PIPES_PLAYWRIGHT"), process.env.PIPES_CHROMIUM, { width: 1280, height: 800 });
const context = browser.context;
const cspErrors = [];
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(60000);
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text()); });
  page.on("pageerror", (e) => cspErrors.push(String(e)));

  step("the pipe's page links to the DLQ browser, which lists the dead-lettered messages");
  await page.goto(`${base}/pipes/${name}`);
  await page.click(`a[href="/pipes/${name}/dlq"]`);
  await page.waitForURL(`**/pipes/${name}/dlq`);
  const rows = page.locator("tr[data-dlq-message]");
  found.listed = await rows.count();
  found.reasons = await page.locator("tr[data-dlq-message] td.why").allTextContents();
  found.previews = await page.locator("tr[data-dlq-message] code.preview").allTextContents();
  // The depth reads "–" until the pipe's first depth poll answers (every
  // few seconds): wait for it rather than read the page's first paint.
  await page.waitForFunction((n) => document.querySelector('[data-field="depths.dlq"]').textContent.trim().startsWith(String(n) + " "),
    dlqCount, { timeout: 70000 }).catch(() => {});
  found.dlqBefore = (await page.locator('[data-field="depths.dlq"]').textContent()).trim();
  await a11y(page, "dlq");
  found.overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await shot(page, "dlq.png");
  await page.setViewportSize({ width: 390, height: 844 });
  found.phoneOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await shot(page, "dlq-phone.png");
  await page.setViewportSize({ width: 1280, height: 800 });

  step("redrive one selected message with the token");
  const picked = await rows.first().getAttribute("data-dlq-message");
  found.picked = picked;
  await page.check(`tr[data-dlq-message="${picked}"] input[type=checkbox]`);
  await page.fill("#rate", "50");
  await page.fill("#token", token);
  await page.click('button[value="selected"]');
  await page.waitForURL(`**/pipes/${name}/dlq?done=redrive`);
  await page.waitForFunction(() => document.querySelector('[data-field="redrive.state"]').textContent === "done");
  found.moved = Number(await page.locator('[data-field="redrive.moved"]').textContent());
  await page.waitForFunction((n) => document.querySelector('[data-field="depths.dlq"]').textContent.trim().startsWith(String(n) + " "),
    dlqCount - 1, { timeout: 70000 });
  found.dlqAfter = (await page.locator('[data-field="depths.dlq"]').textContent()).trim();
  await shot(page, "dlq-redriven.png");
  await page.click("[data-relist]");
  await page.waitForURL(`**/pipes/${name}/dlq`);
  found.listedAfter = await page.locator("tr[data-dlq-message]").count();
  found.pickedStillListed = (await page.locator(`tr[data-dlq-message="${picked}"]`).count()) > 0;

  step("the live tail shows a record passing through the filter");
  await page.goto(`${base}/pipes/${name}/tail`);
  await page.waitForSelector('tr[data-stage="filter"]', { timeout: 60000 });
  await page.waitForFunction(() => [...document.querySelectorAll('tr[data-stage="filter"]')].some((r) => r.cells[3].textContent === "passed"));
  const passedID = await page.evaluate(() => [...document.querySelectorAll('tr[data-stage="filter"]')].find((r) => r.cells[3].textContent === "passed").getAttribute("data-message"));
  await page.waitForFunction((id) => [...document.querySelectorAll("tr[data-stage]")].filter((r) => r.getAttribute("data-message") === id).length >= 3, passedID);
  found.tail = await page.evaluate((id) => [...document.querySelectorAll("tr[data-stage]")].filter((r) => r.getAttribute("data-message") === id)
    .map((r) => ({ stage: r.cells[2].textContent, detail: r.cells[3].textContent, sample: r.cells[4].textContent })).reverse(), passedID);
  found.tailFiltered = await page.evaluate(() => [...document.querySelectorAll('tr[data-stage="filter"]')].some((r) => r.cells[3].textContent === "filtered out"));
  await a11y(page, "tail");
  await shot(page, "tail.png");
  found.tailOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await page.setViewportSize({ width: 390, height: 844 });
  found.phoneOverflow = Math.max(found.phoneOverflow, await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth));
  found.cspErrors = cspErrors;
  process.stdout.write(JSON.stringify(found) + "\n");
} catch (e) {
  process.stderr.write(`failed: ${e && e.stack ? e.stack : e}\nfound so far: ${JSON.stringify(found)}\n`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
