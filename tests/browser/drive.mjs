// Drives bastion's hosted login pages in headless Chromium (Debian's /usr/bin/chromium)
// by clicking and typing, as a person would: signup, logout, a refused login, login with
// an emailed second-factor code, a password reset by the link in a real mail, logout.
//
// Usage: node drive.mjs <server url> <artifacts dir> <email> <password> <new password>
//
// Every page is checked with axe-core (no serious or critical violation), must raise no
// Content-Security-Policy violation and must load nothing from another origin; a
// screenshot of each is saved in <artifacts dir>. Mail is read by the pytest side: this
// script prints {"need": ...} on stdout and reads the answer as one line on stdin.
// Progress is printed as {"step": name}; any failure exits non-zero.

import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [base, artifacts, email, password, newPassword] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const origin = new URL(base).origin;
mkdirSync(artifacts, { recursive: true });

const answers = createInterface({ input: process.stdin });
const stdinLines = answers[Symbol.asyncIterator]();

function say(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

async function ask(need) {
  say(need);
  const { value, done } = await stdinLines.next();
  if (done) throw new Error(`no answer for ${JSON.stringify(need)}`);
  return value.trim();
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

try {
  const context = await browser.newContext({ baseURL: base });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy/i.test(msg.text())) problems.push(`CSP: ${msg.text()}`);
  });
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith("data:") && new URL(url).origin !== origin) {
      problems.push(`request to another origin: ${url}`);
    }
  });

  // axe-core is evaluated through the DevTools protocol, so the page's CSP stays in force.
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
      path: join(artifacts, `${String(shot).padStart(2, "0")}-${name}.png`),
      fullPage: true,
    });
    check(problems.length === 0, `${name}: ${problems.join("; ")}`);
    say({ step: name, minor_axe: result.map((v) => v.id) });
  }

  // The checker itself: it must catch a known critical violation (an image without alt).
  await page.setContent('<html lang="en"><title>t</title><main><img src="data:,"></main></html>');
  await page.evaluate(axeSource);
  const selfTest = await page.evaluate(async () => (await globalThis.axe.run()).violations);
  check(
    selfTest.some((v) => v.id === "image-alt" && v.impact === "critical"),
    "axe-core reports a missing alt text",
  );

  async function heading() {
    return (await page.locator("h1").innerText()).trim();
  }

  // 1. The login page, by keyboard: autofocus on the identifier, then Tab order.
  await page.goto("/app");
  check((await heading()) === "Sign in", `login heading: ${await heading()}`);
  check(
    (await page.evaluate(() => document.activeElement?.id)) === "identifier",
    "the identifier field has the focus",
  );
  await page.keyboard.press("Tab");
  check((await page.evaluate(() => document.activeElement?.id)) === "password", "Tab -> password");
  await page.keyboard.press("Tab");
  check(
    (await page.evaluate(() => document.activeElement?.textContent?.trim())) === "Sign in",
    "Tab -> the Sign in button",
  );
  await audit("login");

  // 2. Sign up from the link on the login page.
  await page.getByRole("link", { name: "Create an account" }).click();
  await page.waitForURL("**/app/signup");
  await audit("signup");
  await page.getByLabel("Email address").fill(email);
  await page.getByLabel("First name (optional)").fill("Ada");
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByLabel("Confirm password").fill(password + "x");
  await page.getByRole("button", { name: "Create account" }).click();
  await page.getByRole("alert").waitFor();
  check(
    (await page.getByLabel("Confirm password").getAttribute("aria-invalid")) === "true",
    "the mismatch is tied to the confirmation field",
  );
  await audit("signup-error");
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByLabel("Confirm password").fill(password);
  await page.getByRole("button", { name: "Create account" }).click();
  await page.waitForURL("**/app/profile");
  check((await page.locator("main").innerText()).includes(email), "the profile shows the email");
  await audit("profile-after-signup");

  // 3. Sign out.
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByText("You have signed out.").waitFor();
  await audit("signed-out");

  // 4. A wrong password, typed and submitted with Enter.
  await page.getByLabel(/Email address/).fill(email);
  await page.getByLabel("Password").fill("wrong-password");
  await page.keyboard.press("Enter");
  await page.getByRole("alert").waitFor();
  await audit("login-refused");

  // 5. The right password: the second factor is a code sent by email.
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByLabel("Code from the email").waitFor();
  await audit("mfa-email-code");
  const code = await ask({ need: "code", to: email });
  await page.getByLabel("Code from the email").fill(code);
  await page.getByRole("button", { name: "Verify" }).click();
  await page.waitForURL("**/app/profile");
  await audit("profile-after-mfa");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByText("You have signed out.").waitFor();

  // 6. Forgot password, then the link in the mail.
  await page.getByRole("link", { name: "Forgot your password?" }).click();
  await page.waitForURL("**/app/forgot-password");
  await audit("forgot-password");
  await page.getByLabel("Email address").fill(email);
  await page.getByRole("button", { name: "Email me a reset link" }).click();
  await page.getByText("If an account exists for this email").waitFor();
  await audit("reset-link-sent");
  const link = await ask({ need: "link", to: email, path: "/app/reset-password" });
  check(new URL(link).origin === origin, `the reset link is ours: ${link}`);
  await page.goto(link);
  await audit("reset-password");
  await page.getByLabel("New password", { exact: true }).fill(newPassword);
  await page.getByLabel("Confirm new password").fill(newPassword);
  await page.getByRole("button", { name: "Change password" }).click();
  await page.getByRole("heading", { name: "Password saved" }).waitFor();
  await audit("password-saved");

  // 7. Sign in with the new password (and a new code), then sign out.
  await page.getByRole("link", { name: "Sign in" }).click();
  await page.getByLabel(/Email address/).fill(email);
  await page.getByLabel("Password").fill(newPassword);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByLabel("Code from the email").waitFor();
  await page.getByLabel("Code from the email").fill(await ask({ need: "code", to: email }));
  await page.getByRole("button", { name: "Verify" }).click();
  await page.waitForURL("**/app/profile");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByText("You have signed out.").waitFor();
  const cookies = await context.cookies();
  check(
    !cookies.some((c) => c.name === "cookie_session" && c.value),
    "no session cookie after sign-out",
  );
  await audit("signed-out-at-last");
  say({ done: true });
} finally {
  answers.close(); // or the open stdin keeps node running
  await browser.close();
}
