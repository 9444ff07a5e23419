"""gRPC: Authorizer's ``authorizer.v1`` services over HTTP/2 (``h2``) in the process's trio
loop, each RPC a call to the same ``service`` facade REST and GraphQL use. Imports
``service`` and ``core``; no other transport."""
