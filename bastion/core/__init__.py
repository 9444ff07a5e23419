"""bastion's pure core: decisions without I/O.

Nothing under ``core`` imports trio, a database driver, a network library or an
HTTP/GraphQL/gRPC framework, and nothing here reads the clock or a random source of
its own: those come in through the small protocols of :mod:`core.ports`. This keeps
every rule testable in milliseconds and usable from any runtime.
"""
