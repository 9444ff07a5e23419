// Passkeys on bastion's hosted pages in headless Chromium (Debian's /usr/bin/chromium),
// with a virtual authenticator from the DevTools protocol (WebAuthn.addVirtualAuthenticator:
// CTAP2, internal, resident keys, user verification): sign up with a password, add a
// passkey on the profile page, sign out, sign in with the passkey alone, sign out, sign in
// with the password and use the passkey as the second factor; the sessions page; and, with
// JavaScript off, the login page without its passkey button but with its password form.
//
// Usage: node passkeys.mjs <server url> <artifacts dir> <email> <password>
//
// Every page is checked with axe-core (no serious or critical violation) and must raise no
// Content-Security-Policy violation (securitypolicyviolation events and console messages),
// no console error and no uncaught exception, and load nothing from another origin.
// Progress is printed as {"step": name} on stdout; any failure exits non-zero.

import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [base, artifacts, email, password] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const origin = new URL(base).origin;
mkdirSync(artifacts, { recursive: true });

function say(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

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

const problems = [];
let shot = 0;

function watch(page) {
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy/i.test(msg.text())) problems.push(`CSP: ${msg.text()}`);
    // (the browser's own request for /favicon.ico, which the server does not have, aside)
    else if (msg.type() === "error" && !msg.location().url.endsWith("/favicon.ico")) {
      problems.push(`console error: ${msg.text()} (${msg.location().url})`);
    }
  });
  page.on("pageerror", (error) => problems.push(`uncaught: ${error.message}`));
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith("data:") && new URL(url).origin !== origin) {
      problems.push(`request to another origin: ${url}`);
    }
  });
}

try {
  const context = await browser.newContext({ baseURL: base });
  // Every violation of the page's CSP, reported from the page through a binding (the init
  // script is injected by the DevTools protocol, outside the page's CSP).
  await context.exposeBinding("reportViolation", (_source, text) => problems.push(`CSP: ${text}`));
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) =>
      globalThis.reportViolation(`${e.violatedDirective} blocked ${e.blockedURI}`),
    );
  });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  watch(page);

  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });

  async function audit(name) {
    await page.evaluate(axeSource);
    const result = await page.evaluate(async () => {
      const run = await globalThis.axe.run(document, {
        runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] },
      });
      return run.violations.map((v) => ({
        id: v.id,
        impact: v.impact,
        help: v.help,
        nodes: v.nodes.map((n) => n.target.join(" ")),
      }));
    });
    const serious = result.filter((v) => v.impact === "serious" || v.impact === "critical");
    check(serious.length === 0, `${name}: axe violations ${JSON.stringify(serious, null, 1)}`);
    shot += 1;
    await page.screenshot({
      path: join(artifacts, `passkeys-${String(shot).padStart(2, "0")}-${name}.png`),
      fullPage: true,
    });
    check(problems.length === 0, `${name}: ${problems.join("; ")}`);
    say({ step: name, minor_axe: result.map((v) => v.id) });
  }

  async function credentials() {
    return (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials;
  }

  async function signOut() {
    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    await page.getByText("You have signed out.").waitFor();
  }

  async function mainText() {
    return await page.locator("main").innerText();
  }

  // 1. The login page shows the passkey button (the script ran); sign up with a password.
  await page.goto("/app");
  await page.getByRole("button", { name: "Sign in with a passkey" }).waitFor();
  await audit("login");
  await page.getByRole("link", { name: "Create an account" }).click();
  await page.getByLabel("Email address").fill(email);
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByLabel("Confirm password").fill(password);
  await page.getByRole("button", { name: "Create account" }).click();
  await page.waitForURL("**/app/profile");
  check((await mainText()).includes("You have no passkey yet."), "no passkey at first");
  await audit("profile-without-passkey");

  // 2. Add a passkey on the profile page: the authenticator now holds one resident key.
  await page.getByLabel("Name of the new passkey (optional)").fill("Chromium key");
  await page.getByRole("button", { name: "Add a passkey" }).click();
  await page.getByText("Chromium key", { exact: true }).waitFor();
  const held = await credentials();
  check(held.length === 1, `one credential on the authenticator, not ${held.length}`);
  check(held[0].isResidentCredential, "the passkey is a discoverable credential");
  check(held[0].rpId === new URL(base).hostname, `rp id ${held[0].rpId}`);
  await audit("profile-with-passkey");

  // 3. Sign out, then sign in with the passkey alone (no email, no password typed).
  await signOut();
  await page.getByRole("button", { name: "Sign in with a passkey" }).click();
  await page.waitForURL("**/app/profile");
  check((await mainText()).includes(email), "signed in by the passkey as the user");
  check((await credentials())[0].signCount >= 1, "the passkey was used");
  await audit("profile-after-passkey");

  // 4. Where the user is signed in: the sessions page (the passkey session is this device).
  await page.getByRole("link", { name: "Where you are signed in" }).click();
  await page.waitForURL("**/app/sessions");
  check((await mainText()).includes("This device"), "the current session is marked");
  await audit("sessions");
  await page.getByRole("link", { name: "Back to your account" }).click();
  await page.waitForURL("**/app/profile");

  // 5. Sign out, then the password: the login is parked for the passkey as second factor.
  await signOut();
  await page.getByLabel(/Email address/).fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.getByRole("button", { name: "Use your passkey" }).waitFor();
  await audit("mfa-passkey");
  const before = (await credentials())[0].signCount;
  await page.getByRole("button", { name: "Use your passkey" }).click();
  await page.waitForURL("**/app/profile");
  check((await mainText()).includes(email), "signed in after the second factor");
  check((await credentials())[0].signCount > before, "the passkey answered the second factor");
  await audit("profile-after-mfa");
  await signOut();

  // 6. Without JavaScript: no passkey button, the password form as always.
  const still = await browser.newContext({ baseURL: base, javaScriptEnabled: false });
  const plain = await still.newPage();
  watch(plain);
  await plain.goto("/app");
  check(
    !(await plain.getByRole("button", { name: "Sign in with a passkey" }).isVisible()),
    "the passkey button stays hidden without the script",
  );
  check(await plain.getByRole("button", { name: "Sign in", exact: true }).isVisible(), "password form");
  check(problems.length === 0, `without JavaScript: ${problems.join("; ")}`);
  say({ step: "login-without-javascript" });
  await still.close();
  say({ done: true });
} finally {
  await browser.close();
}
