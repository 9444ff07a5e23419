"""The service layer: carries out what ``core`` decides (storage, mail, SMS, tokens, rate
limits, audit, metrics, the outbox) behind one facade per domain (``auth``, ``admin``,
``oauth``, ``social``, ``fga``) that REST, GraphQL and gRPC all call.

May import ``storage`` and ``core``; never a transport, nor any wire framework
(Starlette, hypercorn, httptools, graphql-core, grpc).
"""
