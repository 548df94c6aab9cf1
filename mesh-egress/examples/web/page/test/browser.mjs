// A real browser on the web example: Chromium (the Debian package, never a download) loads
// the page, sends a message, waits for the streamed reply and saves a screenshot; then, with
// the provider down, sees the holding line, no cause anywhere in the page, and the follow-up
// once the server's worker keeps the promise.
//
//   CHROMIUM=/usr/bin/chromium node test/browser.mjs http://127.0.0.1:PORT SCREENSHOT.png
//
// Prints one JSON object of what it saw; the Rust test (mesh-egress/tests/web_node.rs)
// asserts on it. Every wait is bounded; the browser is closed on every path.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const [base, screenshot] = process.argv.slice(2);
if (!base || !screenshot) {
  console.error('usage: node test/browser.mjs BASE_URL SCREENSHOT.png');
  process.exit(2);
}
const STEP_MS = 15_000;
const CAUSES = [
  '503',
  'service unavailable',
  'upstream',
  'llm request failed',
  'retries_exhausted',
  'model provider',
  'http',
  'recovery',
];

/** The assistant messages on the page, in order. */
const assistantTexts = () =>
  Array.from(document.querySelectorAll('#messages [data-role="assistant"] .body')).map(
    (body) => body.innerText,
  );

const profile = mkdtempSync(join(tmpdir(), 'mesh-web-chromium-'));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // Headless is asked for by flag, exactly as documented, rather than by puppeteer's default.
  headless: false,
  userDataDir: profile,
  args: [
    '--headless=new',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--window-size=900,900',
  ],
  timeout: STEP_MS,
});
const seen = { consoleErrors: [], failedResponses: [] };
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 900 });
  page.on('console', (message) => {
    if (message.type() === 'error') {
      seen.consoleErrors.push(message.text());
    }
  });
  page.on('pageerror', (error) => seen.consoleErrors.push(String(error)));
  page.on('response', (response) => {
    if (response.status() >= 400) {
      seen.failedResponses.push(`${response.status()} ${new URL(response.url()).pathname}`);
    }
  });
  await page.goto(base, { waitUntil: 'load', timeout: STEP_MS });
  await page.waitForSelector('#prompt', { timeout: STEP_MS });

  // 1. A healthy reply, streamed.
  await page.type('#prompt', 'Is the release green?');
  await page.click('#send');
  await page.waitForFunction(
    () =>
      document.querySelector('#status')?.dataset.status === 'ready' &&
      Array.from(document.querySelectorAll('#messages [data-role="assistant"]')).some((m) =>
        m.innerText.includes('The rollout starts at 14:00'),
      ),
    { timeout: STEP_MS },
  );
  seen.healthy = await page.evaluate(assistantTexts);
  await page.screenshot({ path: screenshot });

  // 2. The provider down: a holding line, then the promise kept.
  await page.select('#fault', 'outage');
  await page.type('#prompt', 'And the deploy?');
  await page.click('#send');
  await page.waitForFunction(
    () =>
      document.querySelector('#status')?.dataset.status === 'ready' &&
      document.querySelectorAll('#messages [data-role="assistant"]').length === 2 &&
      document.querySelector('#owed') !== null,
    { timeout: STEP_MS },
  );
  seen.holding = await page.evaluate(assistantTexts);
  seen.holdingPage = await page.evaluate(() => document.body.innerText);
  seen.causesWhileHolding = CAUSES.filter((cause) =>
    seen.holdingPage.toLowerCase().includes(cause),
  );
  await page.waitForFunction(
    () => document.querySelectorAll('#messages [data-role="assistant"]').length === 3,
    { timeout: STEP_MS },
  );
  seen.followedUp = await page.evaluate(assistantTexts);
  seen.finalPage = await page.evaluate(() => document.body.innerText);
  seen.finalHtml = await page.evaluate(() => document.querySelector('#messages').innerHTML);
  seen.causesAfter = CAUSES.filter((cause) => seen.finalPage.toLowerCase().includes(cause));
  seen.error = await page.evaluate(() => document.querySelector('#error')?.innerText ?? null);

  // 3. A reload shows the same chat, from the server's record.
  await page.reload({ waitUntil: 'load', timeout: STEP_MS });
  await page.waitForFunction(
    () => document.querySelectorAll('#messages [data-role="assistant"]').length === 3,
    { timeout: STEP_MS },
  );
  seen.afterReload = await page.evaluate(assistantTexts);
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-followed-up.png') });
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(seen));
