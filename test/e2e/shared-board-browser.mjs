// Drives a headless Chromium against a whiteboard page for
// shared-board-browser-e2e-test.el: node shared-board-browser.mjs
// NODE_MODULES URL PROFILE-DIR. It talks to the test over stdio: it
// prints READY, then waits for "EDITED ID" (the model's edit through
// the seam), prints SEEN ID when the page shows it, draws a rectangle
// by clicks and prints DRAWN ID, waits for a line (the test saw it
// arrive), draws another and leaves the page at once for a wrong token
// (LEFT ID), checks that the wrong token and a wrong Origin are refused
// (REFUSED token|origin STATUS) and prints DONE.
// Any failure prints FAIL and a reason, and exits nonzero. With a
// fourth argument "hold" (the bench), it only prints READY and keeps
// the page open until its stdin closes.
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import http from "node:http";
import readline from "node:readline";

const [modules, url, profile, mode] = process.argv.slice(2);
const require = createRequire(join(resolve(modules), "_"));
const { chromium } = require("playwright-core");
const say = (line) => process.stdout.write(line + "\n");
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const timeout = 20000;

function upgradeStatus(target, origin) {
  return new Promise((resolve, reject) => {
    const u = new URL(target);
    const req = http.request({
      host: u.hostname, port: u.port, path: u.pathname + u.search,
      headers: {
        Connection: "Upgrade", Upgrade: "websocket", Origin: origin,
        "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
      },
    });
    req.on("upgrade", (res, socket) => { socket.destroy(); resolve(res.statusCode); });
    req.on("response", (res) => { res.resume(); resolve(res.statusCode); });
    req.on("error", reject);
    req.end();
  });
}

let context;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1200, height: 800 },
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = context.pages()[0] || (await context.newPage());
  // Nothing but the host may be reached: the page is self-contained.
  const origin = new URL(url).origin;
  const foreign = [];
  await page.route("**/*", (route) => {
    const r = route.request().url();
    if (r.startsWith(origin) || r.startsWith("data:") || r.startsWith("blob:")) return route.continue();
    foreign.push(r);
    return route.abort();
  });
  const response = await page.goto(url);
  if (response.status() !== 200) throw new Error(`page status ${response.status()}`);
  await page.waitForFunction(() => window.mevedelBoard && window.mevedelBoard.ready(), null, { timeout });
  say("READY");
  if (mode === "hold") {
    while (!(await lines.next()).done);
    await context.close();
    process.exit(0);
  }

  const edited = (await lines.next()).value || "";
  const id = edited.split(" ")[1];
  await page.waitForFunction(
    (id) => window.mevedelBoard.elements().some((e) => e.id === id && e.x === 640),
    id, { timeout });
  await page.waitForSelector(`.mevedel-highlight[data-element-id="${id}"]`, { timeout });
  say(`SEEN ${id}`);

  const before = await page.evaluate(() => window.mevedelBoard.elements().map((e) => e.id));
  // The tool's radio input sits under its icon: click the label, as a user does.
  await page.locator("label", { has: page.locator('[data-testid="toolbar-rectangle"]') }).click();
  // Clear of the shape properties shown on the left while a tool is active.
  await page.mouse.move(480, 450);
  await page.mouse.down();
  await page.mouse.move(540, 500, { steps: 4 });
  await page.mouse.move(620, 560, { steps: 4 });
  await page.mouse.up();
  const drawn = await page.waitForFunction(
    (before) => window.mevedelBoard.elements()
      .find((e) => e.type === "rectangle" && !before.includes(e.id))?.id,
    before, { timeout });
  say(`DRAWN ${await drawn.jsonValue()}`);
  await lines.next();

  // A second rectangle, and the page left at once: the edit still waiting
  // out the page's debounce (40 ms) must reach the board all the same.
  // The debounce is stretched here, so that leaving comes first however
  // loaded the machine.
  await page.evaluate(() => {
    const later = window.setTimeout;
    window.setTimeout = (f, ms, ...args) => later(f, ms === 40 ? 600000 : ms, ...args);
  });
  const known = await page.evaluate(() => window.mevedelBoard.elements().map((e) => e.id));
  await page.locator("label", { has: page.locator('[data-testid="toolbar-rectangle"]') }).click();
  await page.mouse.move(700, 200);
  await page.mouse.down();
  await page.mouse.move(760, 250, { steps: 2 });
  await page.mouse.move(820, 300, { steps: 2 });
  await page.mouse.up();
  const left = await page.evaluate(
    (known) => window.mevedelBoard.elements()
      .find((e) => e.type === "rectangle" && !known.includes(e.id))?.id,
    known);
  if (!left) throw new Error("the second rectangle is not in the scene");
  const wrongToken = url.replace(/token=[0-9a-f]+/, "token=" + "0".repeat(32));
  const refused = await page.goto(wrongToken);
  say(`LEFT ${left}`);
  say(`REFUSED token ${refused.status()}`);
  const ws = url.replace("http://", "ws://").replace("/?token=", "/ws?token=");
  say(`REFUSED origin ${await upgradeStatus(ws, "http://evil.example")}`);
  say(`ACCEPTED origin ${await upgradeStatus(ws, origin)}`);
  if (foreign.length) throw new Error(`the page reached outside its host: ${foreign.join(" ")}`);
  await context.close();
  say("DONE");
} catch (err) {
  say(`FAIL ${String(err && err.stack || err).replace(/\n/g, " | ")}`);
  if (context) await context.close().catch(() => {});
  process.exit(1);
}
process.exit(0);
