// Drives the official @authorizerdev/authorizer-js client against a running bastion, as a
// server-side Node program would: no browser, so every call carries an explicit Origin
// (bastion keeps CSRF on) and the session cookie is forwarded by hand.
//
// Usage: node drive.mjs <base url> <client id>
// Prints one line per step ("ok <step>: ..." or "FAIL <step>: ..."); exits 1 on the first
// failing step.

import { randomUUID } from "node:crypto";
import { Authorizer } from "@authorizerdev/authorizer-js";

const [baseURL, clientID] = process.argv.slice(2);
if (!baseURL || !clientID) {
  console.error("usage: node drive.mjs <base url> <client id>");
  process.exit(2);
}

const authorizer = new Authorizer({
  authorizerURL: baseURL,
  redirectURL: baseURL,
  clientID,
  extraHeaders: { Origin: baseURL },
});

const email = `js-${randomUUID()}@example.com`;
const password = "Str0ng-Passw0rd!";
const scope = ["openid", "profile", "email", "offline_access"];

class StepFailed extends Error {}

function expect(condition, message) {
  if (!condition) throw new StepFailed(message);
}

function describe(errors) {
  return errors.map((e) => e.message ?? String(e)).join("; ");
}

// Runs an authorizer-js call; a response with errors fails the step.
async function call(promise) {
  const { data, errors } = await promise;
  expect(errors.length === 0, describe(errors));
  return data;
}

async function step(name, body) {
  try {
    const detail = await body();
    console.log(`ok ${name}: ${detail}`);
  } catch (error) {
    console.log(`FAIL ${name}: ${error.message}`);
    process.exit(1);
  }
}

// What a browser that logged in would hold and a Node backend would receive from it:
// the session cookie, set by a login on /graphql.
async function browserSessionCookie() {
  const response = await fetch(`${baseURL}/graphql`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Origin: baseURL },
    body: JSON.stringify({
      query: "mutation($p: LoginRequest!) { login(params: $p) { message } }",
      variables: { p: { email, password } },
    }),
  });
  const cookies = response.headers.getSetCookie().map((c) => c.split(";")[0]);
  const session = cookies.find((c) => c.startsWith("cookie_session="));
  expect(session, `no session cookie in ${JSON.stringify(cookies)}`);
  return session;
}

let tokens;
let cookie;

await step("meta", async () => {
  const meta = await call(authorizer.getMetaData());
  expect(meta.client_id === clientID, `client_id ${meta.client_id}`);
  expect(typeof meta.is_sign_up_enabled === "boolean", "is_sign_up_enabled missing");
  return `version ${meta.version}`;
});

await step("signup", async () => {
  const signup = await call(
    authorizer.signup({ email, password, confirm_password: password }),
  );
  expect(signup.access_token, `no access token: ${signup.message}`);
  expect(signup.user.email === email, `user ${signup.user.email}`);
  return signup.message;
});

await step("login", async () => {
  tokens = await call(authorizer.login({ email, password, scope }));
  expect(tokens.access_token, "no access token");
  expect(tokens.refresh_token, "no refresh token despite offline_access");
  expect(tokens.expires_in > 0, `expires_in ${tokens.expires_in}`);
  return tokens.message;
});

await step("profile", async () => {
  const profile = await call(
    authorizer.getProfile({ Authorization: `Bearer ${tokens.access_token}` }),
  );
  expect(profile.email === email, `email ${profile.email}`);
  expect(Array.isArray(profile.roles), "roles missing");
  return profile.email;
});

await step("validate_jwt_token", async () => {
  const result = await call(
    authorizer.validateJWTToken({ token_type: "access_token", token: tokens.access_token }),
  );
  expect(result.is_valid === true, "token reported invalid");
  expect(result.claims.sub === tokens.user.id, `sub ${result.claims.sub}`);
  return "is_valid";
});

await step("validate_session", async () => {
  cookie = await browserSessionCookie();
  const value = cookie.slice("cookie_session=".length);
  const result = await call(authorizer.validateSession({ cookie: value }));
  expect(result.is_valid === true, "session reported invalid");
  expect(result.user.email === email, `user ${result.user.email}`);
  return "is_valid";
});

await step("session", async () => {
  const session = await call(authorizer.getSession({ Cookie: cookie }));
  expect(session.access_token, "no access token");
  expect(session.user.email === email, `user ${session.user.email}`);
  return "fresh tokens from the session cookie";
});

await step("refresh (/oauth/token)", async () => {
  const refreshed = await call(
    authorizer.getToken({ grant_type: "refresh_token", refresh_token: tokens.refresh_token }),
  );
  expect(refreshed.access_token, `no access token: ${JSON.stringify(refreshed)}`);
  expect(refreshed.access_token !== tokens.access_token, "access token not renewed");
  tokens = { ...tokens, ...refreshed };
  return "new access token";
});

await step("logout", async () => {
  const bearer = { Authorization: `Bearer ${tokens.access_token}` };
  await call(authorizer.logout(bearer));
  const after = await authorizer.getProfile(bearer);
  expect(after.errors.length > 0, "the token still works after logout");
  return "token no longer accepted";
});
