// A single-page app on another site, in headless Chromium (Debian's /usr/bin/chromium):
// from a page on a LISTED origin it signs up and reads the profile with the session
// cookie (fetch with credentials: "include"); from a page on an UNLISTED origin the same
// credentialed calls must be blocked (CORS) and must change nothing.
//
// Usage: node cross_origin.mjs <api url> <listed page url> <unlisted page url> <email> <password>
// Prints one JSON line with what each page saw; exits non-zero on a driver failure.

import { chromium } from "playwright-core";

const [api, listed, unlisted, email, password] = process.argv.slice(2);

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

async function run(pageUrl, script, arg) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(pageUrl);
  const result = await page.evaluate(script, arg);
  await context.close();
  return result;
}

async function asListed({ api, email, password }) {
  const json = { "content-type": "application/json" };
  const signup = await fetch(`${api}/v1/signup`, {
    method: "POST",
    credentials: "include",
    headers: json,
    body: JSON.stringify({ email, password, confirm_password: password }),
  });
  const profile = await fetch(`${api}/v1/profile`, { credentials: "include" });
  const session = await fetch(`${api}/v1/session`, {
    method: "POST",
    credentials: "include",
    headers: json,
    body: "{}",
  });
  const refreshed = await session.json();
  return {
    signup: signup.status,
    profile: profile.status,
    email: (await profile.json()).email ?? null,
    session: session.status,
    sessionToken: Boolean(refreshed.access_token),
  };
}

async function asUnlisted({ api }) {
  const outcome = {};
  for (const [name, init] of [
    ["profile", { credentials: "include" }],
    [
      "session",
      { method: "POST", credentials: "include", headers: { "content-type": "application/json" }, body: "{}" },
    ],
  ]) {
    try {
      const answer = await fetch(`${api}/v1/${name}`, init);
      outcome[name] = `read: ${answer.status} ${await answer.text()}`;
    } catch (error) {
      outcome[name] = "blocked";
    }
  }
  const meta = await fetch(`${api}/v1/meta`);
  outcome.meta = meta.status;
  return outcome;
}

try {
  const fromListed = await run(listed, asListed, { api, email, password });
  // The same browser profile would hold the cookie; a fresh context on the unlisted site
  // first signs in through the listed one so the cookie exists, then tries its reads.
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(listed);
  await page.evaluate(
    async ({ api, email, password }) =>
      fetch(`${api}/v1/login`, {
        method: "POST",
        credentials: "include",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email, password }),
      }).then((r) => r.status),
    { api, email, password },
  );
  await page.goto(unlisted);
  const fromUnlisted = await page.evaluate(asUnlisted, { api });
  await context.close();
  process.stdout.write(JSON.stringify({ listed: fromListed, unlisted: fromUnlisted }) + "\n");
} finally {
  await browser.close();
}
