// Helpers of the status page's browser scripts: the accessibility check
// that runs in a page, and the launch of Debian's chromium through
// playwright-core (no browser download).
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// a11yCheck runs in the page: every table has a caption and scoped column
// headers, every input and button a label, every text a contrast of at
// least 4.5:1 (WCAG AA) against its background.
export const a11yCheck = () => {
  const problems = [];
  for (const t of document.querySelectorAll("table")) {
    if (!t.querySelector("caption")) problems.push("a table without a caption");
    for (const th of t.querySelectorAll("thead th")) if (th.getAttribute("scope") !== "col") problems.push("a header without scope");
  }
  for (const i of document.querySelectorAll("input:not([type=hidden])")) if (!i.labels || !i.labels.length) problems.push(`an input without a label (${i.name})`);
  for (const b of document.querySelectorAll("button")) if (!b.textContent.trim()) problems.push("a button without text");
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

// a11yInto runs a11yCheck in page and adds what it found to into
// ({problems, worstContrast}), each problem prefixed by where.
export async function a11yInto(into, page, where) {
  const r = await page.evaluate(a11yCheck);
  into.problems.push(...r.problems.map((p) => `${where}: ${p}`));
  into.worstContrast = Math.min(into.worstContrast, r.worstContrast);
}

// launch starts headless chromium with a profile of its own, through the
// playwright-core of the package.json at playwright; close ends both.
export async function launch(playwright, executablePath, viewport) {
  const { chromium } = createRequire(playwright)("playwright-core");
  const profile = mkdtempSync(join(tmpdir(), "pipes-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: executablePath || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--no-first-run"],
    viewport,
  });
  return {
    context,
    close: async () => { await context.close(); rmSync(profile, { recursive: true, force: true }); },
  };
}
