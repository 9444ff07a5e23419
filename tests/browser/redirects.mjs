// Follows bastion's /authorize redirects in headless Chromium (Debian's /usr/bin/chromium),
// as a signed-in victim's browser would: one target that Python's urlsplit reads as
// bastion's own origin but the browser reads as another host (a backslash), which must be
// refused, and one plain target on a listed origin, which must receive its code.
//
// Usage: node redirects.mjs <api url> <refused authorize url> <allowed authorize url> <email> <password>
// Prints one JSON line: where the browser ended for each, and the HTTP status it saw.

import { chromium } from "playwright-core";

const [api, refusedUrl, allowedUrl, email, password] = process.argv.slice(2);

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

async function follow(page, url) {
  const answer = await page.goto(url);
  return { url: page.url(), status: answer ? answer.status() : null };
}

try {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${api}/app`);
  const signup = await page.evaluate(
    async ({ email, password }) =>
      fetch("/v1/signup", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email, password, confirm_password: password }),
      }).then((r) => r.status),
    { email, password },
  );
  const refused = await follow(page, refusedUrl);
  const allowed = await follow(page, allowedUrl);
  await context.close();
  process.stdout.write(JSON.stringify({ signup, refused, allowed }) + "\n");
} finally {
  await browser.close();
}
