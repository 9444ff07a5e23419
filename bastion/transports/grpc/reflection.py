"""``grpc.reflection.v1alpha.ServerReflection``, answered from protobuf's default
descriptor pool (where every generated ``*_pb2`` module registers its file).

A file is sent with every file it imports, transitively, as grpcio's reflection did. A
name the pool does not know is an ``error_response`` NOT_FOUND; a request of no known
kind INVALID_ARGUMENT; the stream itself stays open for the next request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor
from grpc_reflection.v1alpha import reflection_pb2 as pb

from bastion.transports.grpc.calls import Call, Method, Status

SERVICE = pb.DESCRIPTOR.services_by_name["ServerReflection"].full_name


class Reflection:
    def __init__(self, names: Iterable[str]) -> None:
        """``names``: the full names of the services the server offers."""
        self._names = tuple(sorted(names))
        self._pool = descriptor_pool.Default()

    def methods(self) -> dict[str, Method]:
        return {
            "ServerReflectionInfo": Method(
                pb.ServerReflectionRequest.FromString, streaming=self.info
            )
        }

    async def info(
        self, requests: AsyncIterator[pb.ServerReflectionRequest], call: Call
    ) -> AsyncIterator[pb.ServerReflectionResponse]:
        async for request in requests:
            yield self.answer(request)

    def answer(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        kind = request.WhichOneof("message_request")
        pool = self._pool
        try:
            if kind == "list_services":
                services = [pb.ServiceResponse(name=name) for name in self._names]
                return pb.ServerReflectionResponse(
                    list_services_response=pb.ListServiceResponse(service=services),
                    original_request=request,
                )
            if kind == "file_by_filename":
                return self._files(request, pool.FindFileByName(request.file_by_filename))
            if kind == "file_containing_symbol":
                symbol = request.file_containing_symbol
                return self._files(request, pool.FindFileContainingSymbol(symbol))
            if kind == "file_containing_extension":
                asked = request.file_containing_extension
                extended = pool.FindMessageTypeByName(asked.containing_type)
                extension = pool.FindExtensionByNumber(extended, asked.extension_number)
                return self._files(request, extension.file)
            if kind == "all_extension_numbers_of_type":
                extended = pool.FindMessageTypeByName(request.all_extension_numbers_of_type)
                numbers = sorted(e.number for e in pool.FindAllExtensions(extended))
                return pb.ServerReflectionResponse(
                    all_extension_numbers_response=pb.ExtensionNumberResponse(
                        base_type_name=extended.full_name, extension_number=numbers
                    ),
                    original_request=request,
                )
        except KeyError:
            return _error(request, Status.NOT_FOUND, "not found")
        return _error(request, Status.INVALID_ARGUMENT, "invalid argument")

    @staticmethod
    def _files(
        request: pb.ServerReflectionRequest, file: FileDescriptor
    ) -> pb.ServerReflectionResponse:
        found: dict[str, FileDescriptor] = {}
        waiting = [file]
        while waiting:
            current = waiting.pop()
            if current.name not in found:
                found[current.name] = current
                waiting.extend(current.dependencies)
        serialized = []
        for descriptor in found.values():
            proto = descriptor_pb2.FileDescriptorProto()
            descriptor.CopyToProto(proto)
            serialized.append(proto.SerializeToString())
        return pb.ServerReflectionResponse(
            file_descriptor_response=pb.FileDescriptorResponse(file_descriptor_proto=serialized),
            original_request=request,
        )


def _error(
    request: pb.ServerReflectionRequest, status: Status, message: str
) -> pb.ServerReflectionResponse:
    return pb.ServerReflectionResponse(
        error_response=pb.ErrorResponse(error_code=status, error_message=message),
        original_request=request,
    )
