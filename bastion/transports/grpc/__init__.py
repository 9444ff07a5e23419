"""gRPC: Authorizer's ``authorizer.v1`` services over grpcio, each RPC a call to the same
``service`` facade REST and GraphQL use. Imports ``service`` and ``core``; no other
transport."""
