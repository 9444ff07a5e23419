"""The server entry: the ``bastion`` command (flags, ``migrate``), the process that binds
the HTTP, gRPC and metrics listeners, and the HTTP application's assembly.

The top of the import order: may import ``transports``, ``service``, ``storage`` and
``core``; nothing imports it.
"""
