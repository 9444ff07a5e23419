"""The conformance suite: scenarios any deployment can be held to over REST, GraphQL and
gRPC alike (``bastion-conformance``). It speaks to a server over the wire only; it
imports no server module but the gRPC stubs and the GraphQL schema it checks against."""
