// Passkeys on bastion's hosted pages: the one script they load (--enable-passkeys).
//
// An HTML form cannot reach an authenticator, so this runs the WebAuthn ceremonies over
// the JSON operations (/v1/webauthn_*), same origin, with the page's cookies, and then
// goes where the form's data-next says. Each <form data-passkey="sign-in|register"> stays
// hidden unless this script runs in a browser with passkeys; nothing else on the pages
// needs it. Served from this origin (CSP script-src 'self'); no inline code.
"use strict";

(() => {
  if (!window.PublicKeyCredential || !navigator.credentials) return;

  // base64url (the options' and the server's encoding) <-> bytes
  function bytes(text) {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const binary = atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, "="));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  }

  function base64url(buffer) {
    let binary = "";
    for (const b of new Uint8Array(buffer)) binary += String.fromCharCode(b);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function descriptors(list) {
    return (list || []).map((c) => ({ ...c, id: bytes(c.id) }));
  }

  async function call(path, body) {
    const response = await fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.message || `The server answered ${response.status}.`);
    return answer;
  }

  async function signIn() {
    const options = JSON.parse((await call("/v1/webauthn_login_options", {})).options);
    const credential = await navigator.credentials.get({
      publicKey: {
        ...options,
        challenge: bytes(options.challenge),
        allowCredentials: descriptors(options.allowCredentials),
      },
    });
    const r = credential.response;
    const json = {
      id: credential.id,
      rawId: base64url(credential.rawId),
      type: credential.type,
      clientExtensionResults: credential.getClientExtensionResults(),
      response: {
        clientDataJSON: base64url(r.clientDataJSON),
        authenticatorData: base64url(r.authenticatorData),
        signature: base64url(r.signature),
        userHandle: r.userHandle ? base64url(r.userHandle) : null,
      },
    };
    if (credential.authenticatorAttachment) json.authenticatorAttachment = credential.authenticatorAttachment;
    await call("/v1/webauthn_login_verify", { credential: JSON.stringify(json) });
  }

  async function register(form) {
    const options = JSON.parse((await call("/v1/webauthn_registration_options", {})).options);
    const credential = await navigator.credentials.create({
      publicKey: {
        ...options,
        challenge: bytes(options.challenge),
        user: { ...options.user, id: bytes(options.user.id) },
        excludeCredentials: descriptors(options.excludeCredentials),
      },
    });
    const r = credential.response;
    const json = {
      id: credential.id,
      rawId: base64url(credential.rawId),
      type: credential.type,
      clientExtensionResults: credential.getClientExtensionResults(),
      response: {
        clientDataJSON: base64url(r.clientDataJSON),
        attestationObject: base64url(r.attestationObject),
        transports: r.getTransports ? r.getTransports() : [],
      },
    };
    if (credential.authenticatorAttachment) json.authenticatorAttachment = credential.authenticatorAttachment;
    const name = form.elements.namedItem("name");
    await call("/v1/webauthn_registration_verify", {
      credential: JSON.stringify(json),
      name: name ? name.value.trim() : "",
    });
  }

  const ceremonies = { "sign-in": signIn, register };

  for (const form of document.querySelectorAll("form[data-passkey]")) {
    const ceremony = ceremonies[form.dataset.passkey];
    if (!ceremony) continue;
    const status = form.querySelector(".passkey-status");
    const button = form.querySelector("button");
    form.hidden = false;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      button.disabled = true;
      status.hidden = true;
      try {
        await ceremony(form);
        window.location.assign(form.dataset.next);
      } catch (error) {
        status.textContent =
          error && error.name === "NotAllowedError"
            ? "The passkey was not used: the request was cancelled or timed out."
            : (error && error.message) || "That did not work; please try again.";
        status.hidden = false;
        button.disabled = false;
      }
    });
  }
})();
