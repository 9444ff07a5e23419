"""bastion's trio side: the runtime that carries out what ``core`` decides, and the
three surfaces (REST, GraphQL, gRPC) over one service layer."""
