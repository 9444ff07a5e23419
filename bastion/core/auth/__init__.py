"""Pure helpers the authentication flows decide with: users, policy, passwords, roles,
token claims, emailed links and default emails."""
