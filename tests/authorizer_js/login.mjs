// Logs one user in through the official @authorizerdev/authorizer-js client, as an
// application that moved from Authorizer to bastion would, and prints what it got back.
//
// Usage: node login.mjs <base url> <client id> <email> <password>
// Prints one JSON object: {"user": {...}, "has_access_token": true} or {"error": "..."}.

import { Authorizer } from "@authorizerdev/authorizer-js";

const [baseURL, clientID, email, password] = process.argv.slice(2);
const authorizer = new Authorizer({
  authorizerURL: baseURL,
  redirectURL: baseURL,
  clientID,
  extraHeaders: { Origin: baseURL },
});

const { data, errors } = await authorizer.login({ email, password });
if (errors.length > 0) {
  console.log(JSON.stringify({ error: errors.map((e) => e.message ?? String(e)).join("; ") }));
} else {
  console.log(JSON.stringify({ user: data.user ?? null, has_access_token: !!data.access_token }));
}
