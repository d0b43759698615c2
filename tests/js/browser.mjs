// Drives the page written by `minitf export web` in the system's Chromium, headless, for the tests and the
// benchmark:  node browser.mjs URL [--offline]
// Prints {"ready": true} once the page has loaded its model, then answers one JSON request per stdin line:
//   {"prompt": "...", "max_new_tokens": N}       types the prompt, clicks Generate, waits for the streamed text
//   {"source": "...", "sentences": ["...", ...]}  fills the similarity box, clicks Compare, reads the scores
//   {"text": "...", "max_new_tokens": N}          types the text, clicks Translate, waits for the streamed translation
// with "dtype" to switch the weights first and "screenshot" (a path) to take one afterwards. The answer:
// {"status", "seconds" (as the page measured the model), "text" or "scores" (the full numbers), "shown",
// "offsite" (every URL the page asked of another origin so far) and "violations" (the browser's
// Content-Security-Policy reports)}.
// The page loads transformers.js and onnxruntime-web from the jsDelivr URLs it names; those requests are answered
// from node_modules beside this script (same package and version, or a 404 saying what differs), every other
// request off the page's own server is refused: nothing reaches the network. With --offline (a bundled page) every
// request off the page's own server is refused, host names resolve nowhere, and the server's files come with the
// page's own Content-Security-Policy (its meta tag) as a header, which holds the worker to it too.
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const [url, mode] = process.argv.slice(2);
const offline = mode === '--offline';
const NODE_MODULES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules');
const CDN = /^https:\/\/cdn\.jsdelivr\.net\/npm\/(@huggingface\/transformers|onnxruntime-web)@([^/]+)\/(.+)$/;
const CONTENT_TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
const CHROMIUM_FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const offsite = [];
let policy = null;

/** The Content-Security-Policy of the page's meta tag (an --offline page must have one). */
async function pagePolicy() {
  const page = await (await fetch(url)).text();
  const tag = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(page);
  if (!tag) throw new Error(`${url} has no Content-Security-Policy meta tag`);
  return tag[1].replaceAll('&#x27;', "'").replaceAll('&quot;', '"').replaceAll('&amp;', '&');
}

async function answerFromNodeModules(route) {
  const requested = route.request().url();
  if (requested.startsWith(new URL(url).origin)) {
    if (!offline) return route.continue();
    const response = await route.fetch();
    return route.fulfill({ response, headers: { ...response.headers(), 'content-security-policy': policy } });
  }
  offsite.push(requested);
  if (offline) return route.abort('blockedbyclient');
  const match = CDN.exec(requested);
  if (!match) return route.abort('blockedbyclient');
  const [, name, version, file] = match;
  const installed = JSON.parse(fs.readFileSync(path.join(NODE_MODULES, name, 'package.json'), 'utf8')).version;
  if (installed !== version) {
    return route.fulfill({ status: 404, body: `${name}@${version} requested, ${installed} installed` });
  }
  return route.fulfill({ path: path.join(NODE_MODULES, name, file), contentType: CONTENT_TYPES[path.extname(file)] });
}

const userDataDir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'minitf-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: offline ? [...CHROMIUM_FLAGS, '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'] : CHROMIUM_FLAGS,
});
const log = [];
const violations = [];
try {
  if (offline) policy = await pagePolicy();
  await context.route('**/*', answerFromNodeModules);
  const page = context.pages()[0] ?? await context.newPage();
  const onConsole = (message) => {
    log.push(`${message.type()}: ${message.text()}`);
    if (message.text().includes('Content Security Policy')) violations.push(message.text());
  };
  page.on('console', onConsole);
  page.on('worker', (worker) => worker.on('console', onConsole));
  page.on('pageerror', (error) => log.push(`page error: ${error.message}`));
  await page.goto(url);
  const form = await page.waitForSelector('form:not([hidden])', { timeout: 30000 });
  const formId = `#${await form.getAttribute('id')}`;

  /** Runs `step` (an action on the page), waits for the page to finish it, and returns its status line. */
  async function finished(step) {
    const before = Number((await form.getAttribute('data-done')) ?? 0);
    await step();
    await page.waitForFunction(([selector, count]) => Number(document.querySelector(selector).dataset.done ?? 0) > count,
      [formId, before], { timeout: 300000, polling: 50 });
    return page.textContent('#status');
  }

  await page.waitForFunction((selector) => document.querySelector(selector).dataset.done, formId, { timeout: 60000 });
  const loaded = await page.textContent('#status');
  if (loaded.startsWith('Error')) throw new Error(loaded);
  console.log(JSON.stringify({ ready: true }));
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const request = JSON.parse(line);
    const select = `${formId} .dtype`;
    if (request.dtype && request.dtype !== (await page.inputValue(select))) {
      await finished(() => page.selectOption(select, request.dtype));
    }
    let status;
    if ('prompt' in request) {
      await page.fill('#prompt', request.prompt);
      await page.fill('#max-new-tokens', String(request.max_new_tokens));
      status = await finished(() => page.click(`${formId} button[type=submit]`));
    } else if ('text' in request) {
      await page.fill('#source-text', request.text);
      await page.fill('#translation-max-new-tokens', String(request.max_new_tokens));
      status = await finished(() => page.click(`${formId} button[type=submit]`));
    } else {
      await page.fill('#source-sentence', request.source);
      await page.fill('#sentences', request.sentences.join('\n'));
      status = await finished(() => page.click(`${formId} button[type=submit]`));
    }
    if (request.screenshot) await page.screenshot({ path: request.screenshot, fullPage: true });
    console.log(JSON.stringify({
      status,
      seconds: Number(await form.getAttribute('data-seconds')),
      text: await page.textContent(formId === '#translation' ? '#translated' : '#completion .generated'),
      scores: await page.$$eval('#scores td.score', (cells) => cells.map((cell) => Number(cell.dataset.score))),
      shown: await page.$$eval('#scores td.score', (cells) => cells.map((cell) => cell.textContent)),
      offsite,
      violations,
    }));
  }
} catch (error) {
  console.error(`${error.message}\npage console:\n${log.join('\n')}`);
  process.exitCode = 1;
} finally {
  await context.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
