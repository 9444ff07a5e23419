"""The trio side of the embedded authorization engine: request parsing and this process's
view of the store. The operations themselves are :mod:`transports.fga_service`."""
